/* The optimal ate pairing of one curve (host only), instantiated by pairing_instances.h.
 * Beyond field_fp12.h's names (PC, F1, F2, XI0, FROB) it needs
 *   G1C, G2C  the group prefixes (curve.h)     TWIST_D  1 for a D-type twist (BN254), 0 for M
 *   LOOP, LOOP_LEN  the Miller loop's signed digits, most significant first (NAF of 6u+2 for
 *                   BN254, of |u| for BLS12-381)     NEG_U  1 when u < 0 (BLS12-381)
 *   BN_FROB_STEPS  1 for BN curves (the two extra lines through pi(Q) and -pi^2(Q))
 *   HARD, HARD_BITS  (p^4 - p^2 + 1)/r written in base p: 4 digits of NL limbs, standard form
 *   HPOLY, HPOLY_K, HPOLY_BITS  a multiple of it as a polynomial in p and u (pairing.py)
 *   UNAF, UNAF_LEN  the NAF of |u|, most significant first
 *   BCOEF, B2COEF  b of G1 and b' of the twist, HALF 1/2 in Fp (Montgomery)  RORD  r (4 limbs, standard form)
 *   PSI_X, PSI_Y, PSI_K, PSI_NEG  the G2 endomorphism's constants and eigenvalue (pairing.py)
 *   G1_SUBGROUP  1 when G1 has a cofactor (BLS12-381), so on-curve is not enough; then also
 *   G1_BETA, G1_K  phi's cube root of unity and u^2 (pairing.py)
 * Points cross as affine Montgomery limbs, all-zero for infinity (the zkey layout). */
#include "field_fp12.h"

#define QN(x) PS_CAT3(PC, _, x)
#define Q1(x) PS_CAT3(F1, _, x)
#define Q2(x) PS_CAT3(F2, _, x)
#define E1 Q1(t)
#define E2 Q2(t)
#define E6 QN(fp6_t)
#define E12 QN(fp12_t)
#define A1 PS_CAT(G1C, _affine)
#define A2 PS_CAT(G2C, _affine)
#define X1 PS_CAT(G1C, _xyzz)
#define X2 PS_CAT(G2C, _xyzz)

/* 0 valid, 1 off the curve, 2 outside the order-r subgroup; infinity is valid. */
int QN(g1_check)(const u64 *pt) {
    const A1 *p = (const A1 *)pt;
    if (PS_CAT(G1C, _affine_is_inf)(p)) return 0;
    E1 l, r, b = { BCOEF };
    Q1(sqr)(&l, &p->y);
    Q1(sqr)(&r, &p->x); Q1(mul)(&r, &r, &p->x); Q1(add)(&r, &r, &b);
    if (!Q1(eq)(&l, &r)) return 1;
#if G1_SUBGROUP
    /* P is in G1 iff phi(P) = (beta x, y) equals -[u^2]P (Bowe 2019): a 128-bit
     * multiplication instead of one by r */
    static const u64 betal[] = G1_BETA;
    const u64 k[4] = G1_K; X1 t; E1 beta, bx, u1, u2, ny;
    memcpy(&beta, betal, sizeof beta);
    PS_CAT(G1C, _scalar_mul)(&t, p, k);
    if (PS_CAT(G1C, _is_inf)(&t)) return 2;
    Q1(mul)(&bx, &beta, &p->x); Q1(neg)(&ny, &p->y);
    Q1(mul)(&u1, &bx, &t.ZZ); Q1(mul)(&u2, &ny, &t.ZZZ);   /* affine vs XYZZ: x ZZ = X, y ZZZ = Y */
    if (!(Q1(eq)(&u1, &t.X) && Q1(eq)(&u2, &t.Y))) return 2;
#endif
    return 0;
}
/* Membership in G2 through the endomorphism psi (El Housni, Guillevic, Piellard 2022 for BN;
 * Scott 2021 for BLS12): Q is in the order-r subgroup iff psi(Q) = [k]Q with k = p mod r,
 * 6u^2 for BN and u for BLS12: a 128- or 64-bit multiplication instead of one by r. */
int QN(g2_check)(const u64 *pt) {
    const A2 *q = (const A2 *)pt;
    if (PS_CAT(G2C, _affine_is_inf)(q)) return 0;
    static const u64 bl[] = B2COEF, cxl[] = PSI_X, cyl[] = PSI_Y;
    E2 l, r, b, cx, cy; memcpy(&b, bl, sizeof b); memcpy(&cx, cxl, sizeof cx); memcpy(&cy, cyl, sizeof cy);
    Q2(sqr)(&l, &q->y);
    Q2(sqr)(&r, &q->x); Q2(mul)(&r, &r, &q->x); Q2(add)(&r, &r, &b);
    if (!Q2(eq)(&l, &r)) return 1;
    A2 s;
    QN(fp2_conj)(&s.x, &q->x); Q2(mul)(&s.x, &s.x, &cx);
    QN(fp2_conj)(&s.y, &q->y); Q2(mul)(&s.y, &s.y, &cy);
    if (PSI_NEG) Q2(neg)(&s.y, &s.y);  /* compare with [|k|]Q: psi(Q) = -[|k|]Q */
    const u64 k[4] = PSI_K; X2 t;
    PS_CAT(G2C, _scalar_mul)(&t, q, k);
    if (PS_CAT(G2C, _is_inf)(&t)) return 2;
    /* affine s equals XYZZ t iff X = x ZZ and Y = y ZZZ */
    E2 u1, u2;
    Q2(mul)(&u1, &s.x, &t.ZZ); Q2(mul)(&u2, &s.y, &t.ZZZ);
    return (Q2(eq)(&u1, &t.X) && Q2(eq)(&u2, &t.Y)) ? 0 : 2;
}

/* The twisted point T of the Miller loop in homogeneous projective coordinates
 * (x = X/Z, y = Y/Z), so no step needs an inversion. */
typedef struct { E2 X, Y, Z; } QN(proj_t);
#define PJ QN(proj_t)

/* f <- f * l with l = l0 + l1 w, l_i = (l_i0, l_i1, 0) in Fp6: the shape of every line,
 * 15 Fp2 products instead of 18. */
static void QN(fp6_mul_01)(E6 *r, const E6 *a, const E2 *b0, const E2 *b1) {
    E2 t0, t1, s, u, c0, c1, c2;
    Q2(mul)(&t0, &a->a0, b0); Q2(mul)(&t1, &a->a1, b1);
    Q2(add)(&s, &a->a1, &a->a2); Q2(mul)(&c0, &s, b1); Q2(sub)(&c0, &c0, &t1);
    QN(fp2_mul_xi)(&c0, &c0); Q2(add)(&c0, &c0, &t0);              /* a0 b0 + xi a2 b1 */
    Q2(add)(&s, &a->a0, &a->a1); Q2(add)(&u, b0, b1); Q2(mul)(&c1, &s, &u);
    Q2(sub)(&c1, &c1, &t0); Q2(sub)(&c1, &c1, &t1);                 /* a0 b1 + a1 b0 */
    Q2(add)(&s, &a->a0, &a->a2); Q2(mul)(&c2, &s, b0);
    Q2(sub)(&c2, &c2, &t0); Q2(add)(&c2, &c2, &t1);                 /* a1 b1 + a2 b0 */
    r->a0 = c0; r->a1 = c1; r->a2 = c2;
}
static void QN(fp12_mul_line)(E12 *f, const E2 *l00, const E2 *l01, const E2 *l10, const E2 *l11) {
    E6 t0, t1, s;
    E2 m0, m1;
    QN(fp6_mul_01)(&t0, &f->c0, l00, l01);
    QN(fp6_mul_01)(&t1, &f->c1, l10, l11);
    Q2(add)(&m0, l00, l10); Q2(add)(&m1, l01, l11);
    QN(fp6_add)(&s, &f->c0, &f->c1); QN(fp6_mul_01)(&s, &s, &m0, &m1);
    QN(fp6_sub)(&s, &s, &t0); QN(fp6_sub)(&f->c1, &s, &t1);
    QN(fp6_mul_v)(&t1, &t1); QN(fp6_add)(&f->c0, &t0, &t1);
}

/* A line through points of the twist, scaled by a factor in Fp2, evaluated at P:
 * cy yP + cx xP (.) + cc (.). Untwisted, the affine line of slope lam through T is
 * D-type, psi(x, y) = (x w^2, y w^3):  yP - lam xP w + (lam xT - yT) w^3;
 * M-type, psi(x, y) = (x w^-2, y w^-3), times w^3: (lam xT - yT) - lam xP w^2 + yP w^3.
 * Factors in Fp4 (w^3, the Fp2 scalings, the vertical lines in Fp6) are erased by the final
 * exponentiation, whose exponent is a multiple of p^4 - 1 and of p^6 - 1. */
static void QN(mul_line)(E12 *f, const E2 *cy, const E2 *cx, const E2 *cc, const A1 *P) {
    E2 ly, lx, zero; Q2(zero)(&zero);
    QN(fp2_mul_fp)(&ly, cy, &P->y); QN(fp2_mul_fp)(&lx, cx, &P->x);
    if (TWIST_D) QN(fp12_mul_line)(f, &ly, &zero, &lx, cc);
    else QN(fp12_mul_line)(f, cc, &lx, &zero, &ly);
}

/* T <- 2T and f <- f * (tangent at T)(P). Doubling with the tangent's coefficients from
 * Costello-Lange-Naehrig (PKC 2010) / Aranha et al. (Eurocrypt 2011) for y^2 = x^3 + b':
 * scaled by -2YZ, the tangent is -H yP + 3 X^2 xP + (3 b' Z^2 - Y^2), H = 2YZ. */
static void QN(double_step)(E12 *f, PJ *T, const A1 *P) {
    static const u64 b2l[] = B2COEF, halfl[] = HALF;
    E2 b2; memcpy(&b2, b2l, sizeof b2);
    E1 half; memcpy(&half, halfl, sizeof half);
    E2 A, B, C, E, F, G, H, I, J, t;
    Q2(mul)(&A, &T->X, &T->Y); QN(fp2_mul_fp)(&A, &A, &half);           /* XY/2 */
    Q2(sqr)(&B, &T->Y); Q2(sqr)(&C, &T->Z);
    Q2(mul)(&E, &b2, &C); Q2(dbl)(&t, &E); Q2(add)(&E, &E, &t);          /* 3 b' Z^2 */
    Q2(dbl)(&F, &E); Q2(add)(&F, &F, &E);                                /* 3E */
    Q2(add)(&G, &B, &F); QN(fp2_mul_fp)(&G, &G, &half);
    Q2(add)(&H, &T->Y, &T->Z); Q2(sqr)(&H, &H); Q2(sub)(&H, &H, &B); Q2(sub)(&H, &H, &C);
    Q2(sub)(&I, &E, &B); Q2(sqr)(&J, &T->X);
    Q2(sub)(&t, &B, &F); Q2(mul)(&T->X, &A, &t);                         /* X3 = A (B - F) */
    Q2(sqr)(&T->Y, &G); Q2(sqr)(&t, &E); Q2(sub)(&T->Y, &T->Y, &t);
    Q2(dbl)(&t, &t); Q2(sub)(&T->Y, &T->Y, &t);                          /* Y3 = G^2 - 3E^2 */
    Q2(mul)(&T->Z, &B, &H);                                              /* Z3 = B H */
    Q2(neg)(&H, &H); Q2(dbl)(&t, &J); Q2(add)(&J, &J, &t);
    QN(mul_line)(f, &H, &J, &I, P);
}

/* T <- T + S (S affine) and f <- f * (line through T and S)(P). With theta = Y - yS Z and
 * L = X - xS Z, lam = theta / L; scaled by L the line is L yP - theta xP + (theta xS - L yS). */
static void QN(add_step)(E12 *f, PJ *T, const A2 *S, const A1 *P) {
    E2 th, L, C, D, E, F, G, H, t, cc;
    Q2(mul)(&t, &S->y, &T->Z); Q2(sub)(&th, &T->Y, &t);
    Q2(mul)(&t, &S->x, &T->Z); Q2(sub)(&L, &T->X, &t);
    Q2(sqr)(&C, &th); Q2(sqr)(&D, &L); Q2(mul)(&E, &L, &D);
    Q2(mul)(&F, &T->Z, &C); Q2(mul)(&G, &T->X, &D);
    Q2(add)(&H, &E, &F); Q2(sub)(&H, &H, &G); Q2(sub)(&H, &H, &G);      /* E + F - 2G */
    Q2(mul)(&T->X, &L, &H);
    Q2(sub)(&t, &G, &H); Q2(mul)(&t, &th, &t); Q2(mul)(&G, &E, &T->Y); Q2(sub)(&T->Y, &t, &G);
    Q2(mul)(&T->Z, &T->Z, &E);
    Q2(mul)(&cc, &th, &S->x); Q2(mul)(&t, &L, &S->y); Q2(sub)(&cc, &cc, &t);
    Q2(neg)(&th, &th);
    QN(mul_line)(f, &L, &th, &cc, P);
}

/* prod_i f_{loop, Q_i}(P_i) over the pairs with neither point at infinity (whose factor is
 * 1), sharing the squarings of f: the product of Miller loops that a multi-pairing needs.
 * T never meets +-S or infinity: Q has order r and every multiple reached is below r. */
static void QN(miller_loop)(E12 *f, const A1 *P_in, const A2 *Q_in, size_t n_in) {
    static const signed char digits[LOOP_LEN] = LOOP;
    size_t cap = n_in ? n_in : 1;
    A1 *P = (A1 *)malloc(sizeof(A1) * cap);
    A2 *Q = (A2 *)malloc(sizeof(A2) * cap * 2), *Qn = Q + cap;
    PJ *T = (PJ *)malloc(sizeof(PJ) * cap);
    size_t n = 0;
    for (size_t i = 0; i < n_in; i++) {
        if (PS_CAT(G1C, _affine_is_inf)(&P_in[i]) || PS_CAT(G2C, _affine_is_inf)(&Q_in[i])) continue;
        P[n] = P_in[i]; Q[n] = Q_in[i];
        T[n].X = Q_in[i].x; T[n].Y = Q_in[i].y; Q2(one)(&T[n].Z);
        Qn[n].x = Q_in[i].x; Q2(neg)(&Qn[n].y, &Q_in[i].y);
        n++;
    }
    QN(fp12_one)(f);
    if (n) {
        for (int d = 1; d < LOOP_LEN; d++) {
            QN(fp12_sqr)(f, f);
            for (size_t i = 0; i < n; i++) {
                QN(double_step)(f, &T[i], &P[i]);
                if (digits[d] > 0) QN(add_step)(f, &T[i], &Q[i], &P[i]);
                else if (digits[d] < 0) QN(add_step)(f, &T[i], &Qn[i], &P[i]);
            }
        }
        if (BN_FROB_STEPS) {
            /* optimal ate for BN: also the lines through pi(Q) and -pi^2(Q), with
             * pi(x, y) = (conj(x) g_{1,2}, conj(y) g_{1,3}), pi^2(x, y) = (x g_{2,2}, y g_{2,3}) */
            E2 g12, g13, g22, g23;
            QN(frob_const)(&g12, 1, 2); QN(frob_const)(&g13, 1, 3);
            QN(frob_const)(&g22, 2, 2); QN(frob_const)(&g23, 2, 3);
            for (size_t i = 0; i < n; i++) {
                A2 S;
                QN(fp2_conj)(&S.x, &Q[i].x); Q2(mul)(&S.x, &S.x, &g12);
                QN(fp2_conj)(&S.y, &Q[i].y); Q2(mul)(&S.y, &S.y, &g13);
                QN(add_step)(f, &T[i], &S, &P[i]);
                Q2(mul)(&S.x, &Q[i].x, &g22);
                Q2(mul)(&S.y, &Q[i].y, &g23); Q2(neg)(&S.y, &S.y);
                QN(add_step)(f, &T[i], &S, &P[i]);
            }
        }
        /* f_{-|u|} equals 1/f_{|u|} up to erased factors, and on the unitary result of the
         * final exponentiation the inverse is the conjugate f^(p^6) */
        if (NEG_U) QN(fp12_conj)(f, f);
    }
    free(P); free(Q); free(T);
}

/* Squaring in the cyclotomic subgroup (Granger-Scott, PKC 2010): seen over
 * Fp4 = Fp2[s]/(s^2 - xi), s = w^3, f = A + B w + C w^2 with A = g0 + g3 s, B = g1 + g4 s,
 * C = g2 + g5 s (g_k the coefficient of w^k), and for f^(p^6 + 1) = 1
 *   f^2 = (3A^2 - 2 conj A) + (3 s C^2 + 2 conj B) w + (3B^2 - 2 conj C) w^2,
 * three Fp4 squarings (9 Fp2 squarings) instead of a general Fp12 squaring. */
static void QN(fp4_sqr)(E2 *r0, E2 *r1, const E2 *a0, const E2 *a1) {
    E2 t0, t1, t2;
    Q2(sqr)(&t0, a0); Q2(sqr)(&t1, a1);
    Q2(add)(&t2, a0, a1); Q2(sqr)(&t2, &t2); Q2(sub)(&t2, &t2, &t0); Q2(sub)(r1, &t2, &t1);
    QN(fp2_mul_xi)(&t1, &t1); Q2(add)(r0, &t0, &t1);
}
/* r = 3 t - 2 g (sign -1) or 3 t + 2 g (sign +1) */
static void QN(gs_combine)(E2 *r, const E2 *t, const E2 *g, int sign) {
    E2 d; Q2(sub)(&d, t, g); if (sign > 0) Q2(add)(&d, t, g);
    Q2(dbl)(&d, &d); Q2(add)(r, &d, t);
}
static void QN(cyclo_sqr)(E12 *r, const E12 *f) {
    const E2 *g0 = &f->c0.a0, *g1 = &f->c1.a0, *g2 = &f->c0.a1, *g3 = &f->c1.a1, *g4 = &f->c0.a2, *g5 = &f->c1.a2;
    E2 a0, a1, b0, b1, c0, c1, t;
    QN(fp4_sqr)(&a0, &a1, g0, g3);      /* A^2 */
    QN(fp4_sqr)(&b0, &b1, g1, g4);      /* B^2 */
    QN(fp4_sqr)(&c0, &c1, g2, g5);      /* C^2 */
    QN(fp2_mul_xi)(&t, &c1);            /* s C^2 = xi c1 + c0 s */
    E12 o;
    /* A: 3A^2 - 2 conj A, conj A = g0 - g3 s */
    QN(gs_combine)(&o.c0.a0, &a0, g0, -1);
    QN(gs_combine)(&o.c1.a1, &a1, g3, +1);
    /* B: 3 s C^2 + 2 conj B */
    QN(gs_combine)(&o.c1.a0, &t, g1, +1);
    QN(gs_combine)(&o.c0.a2, &c0, g4, -1);
    /* C: 3B^2 - 2 conj C */
    QN(gs_combine)(&o.c0.a1, &b0, g2, -1);
    QN(gs_combine)(&o.c1.a2, &b1, g5, +1);
    *r = o;
}

/* f^((p^12 - 1)/r): easy part f^((p^6 - 1)(p^2 + 1)) by conjugation, one inversion and a
 * Frobenius; hard part (p^4 - p^2 + 1)/r = d0 + d1 p + d2 p^2 + d3 p^3 as one joint
 * (Straus) exponentiation of f, f^p, f^(p^2), f^(p^3), whose powers are Frobenius maps. */
static void QN(final_exp)(E12 *r, const E12 *f) {
    static const u64 hard[4][NL] = HARD;
    E12 a, b, t[16];
    QN(fp12_inv)(&a, f); QN(fp12_conj)(&b, f); QN(fp12_mul)(&a, &a, &b);   /* f^(p^6 - 1) */
    QN(fp12_frob)(&b, &a, 2); QN(fp12_mul)(&a, &a, &b);                     /* ^(p^2 + 1) */
    QN(fp12_one)(&t[0]); t[1] = a;
    QN(fp12_frob)(&t[2], &a, 1); QN(fp12_frob)(&t[4], &a, 2); QN(fp12_frob)(&t[8], &a, 3);
    for (int m = 3; m < 16; m++) {
        int low = m & -m;
        if (m != low) QN(fp12_mul)(&t[m], &t[m - low], &t[low]);
    }
    E12 acc; QN(fp12_one)(&acc);
    for (int bit = HARD_BITS - 1; bit >= 0; bit--) {
        QN(cyclo_sqr)(&acc, &acc);   /* acc stays unitary: its bases are */
        int m = 0;
        for (int j = 0; j < 4; j++) m |= (int)((hard[j][bit / 64] >> (bit % 64)) & 1) << j;
        if (m) QN(fp12_mul)(&acc, &acc, &t[m]);
    }
    *r = acc;
}

/* f^u for f in the cyclotomic subgroup (after the easy part), where 1/f = conj(f):
 * signed-digit square-and-multiply over the NAF of |u|, conjugated when u < 0. */
static void QN(cyclo_pow_u)(E12 *r, const E12 *f) {
    static const signed char digits[UNAF_LEN] = UNAF;
    E12 fc, acc = *f;
    QN(fp12_conj)(&fc, f);
    for (int d = 1; d < UNAF_LEN; d++) {
        QN(cyclo_sqr)(&acc, &acc);
        if (digits[d] > 0) QN(fp12_mul)(&acc, &acc, f);
        else if (digits[d] < 0) QN(fp12_mul)(&acc, &acc, &fc);
    }
    if (NEG_U) QN(fp12_conj)(&acc, &acc);
    *r = acc;
}

/* f^(m (p^12 - 1)/r) with m coprime to r (hard_part_poly in pairing.py): the easy part as in
 * final_exp, then the hard part m (p^4 - p^2 + 1)/r = sum_{i,k} c_ik p^i u^k evaluated as
 * prod frob_i(f^(u^k))^c_ik: HPOLY_K - 1 exponentiations by u and one joint exponentiation
 * with the small signed c_ik. What pairing checks use: e^m = 1 iff e = 1. */
static void QN(final_exp_check)(E12 *r, const E12 *f) {
    static const int coef[4][HPOLY_K] = HPOLY;
    E12 a, b, y[HPOLY_K], base[4][HPOLY_K];
    QN(fp12_inv)(&a, f); QN(fp12_conj)(&b, f); QN(fp12_mul)(&a, &a, &b);
    QN(fp12_frob)(&b, &a, 2); QN(fp12_mul)(&y[0], &a, &b);
    for (int k = 1; k < HPOLY_K; k++) QN(cyclo_pow_u)(&y[k], &y[k - 1]);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < HPOLY_K; k++) {
            if (!coef[i][k]) continue;
            if (i) QN(fp12_frob)(&base[i][k], &y[k], i); else base[i][k] = y[k];
            if (coef[i][k] < 0) QN(fp12_conj)(&base[i][k], &base[i][k]);
        }
    E12 acc; QN(fp12_one)(&acc);
    for (int bit = HPOLY_BITS - 1; bit >= 0; bit--) {
        QN(cyclo_sqr)(&acc, &acc);   /* acc stays unitary: its bases are */
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < HPOLY_K; k++) {
                int c = coef[i][k] < 0 ? -coef[i][k] : coef[i][k];
                if ((c >> bit) & 1) QN(fp12_mul)(&acc, &acc, &base[i][k]);
            }
    }
    *r = acc;
}

/* The Fp2 coefficients of w^0..w^5, each (c0, c1), standard form. */
static void QN(fp12_to_std)(u64 *out, const E12 *e) {
    const E2 *k[6] = { &e->c0.a0, &e->c1.a0, &e->c0.a1, &e->c1.a1, &e->c0.a2, &e->c1.a2 };
    for (int i = 0; i < 6; i++) {
        E2 s; Q2(from_mont)(&s, k[i]);
        memcpy(out + 2 * i * NL, &s, sizeof(E2));
    }
}

/* The product of the n pairs' Miller loops, as raw Montgomery limbs (12 NL words): a
 * factor that pairing_check can take back, so a verifier computes e(alpha, beta)'s once. */
void QN(miller_loop_api)(u64 *out, const u64 *g1, const u64 *g2, size_t n) {
    E12 f;
    QN(miller_loop)(&f, (const A1 *)g1, (const A2 *)g2, n);
    memcpy(out, &f, sizeof f);
}

/* 1 iff factor * prod_i e(P_i, Q_i) = 1 (factor: a miller_loop_api result, or NULL).
 * g1: n affine G1 points, g2: n affine G2 points. */
int QN(pairing_check)(const u64 *g1, const u64 *g2, size_t n, const u64 *factor) {
    E12 f, e;
    QN(miller_loop)(&f, (const A1 *)g1, (const A2 *)g2, n);
    if (factor) { E12 m; memcpy(&m, factor, sizeof m); QN(fp12_mul)(&f, &f, &m); }
    QN(final_exp_check)(&e, &f);
    return QN(fp12_is_one)(&e);
}

/* e(P, Q)^m as pairing() lays it out, through the check's final exponentiation (tests). */
void QN(pairing_power)(u64 *out, const u64 *g1, const u64 *g2) {
    E12 f, e;
    QN(miller_loop)(&f, (const A1 *)g1, (const A2 *)g2, 1);
    QN(final_exp_check)(&e, &f);
    QN(fp12_to_std)(out, &e);
}

/* e(P, Q) as 12 standard-form Fp values: the Fp2 coefficients of w^0..w^5, each (c0, c1). */
void QN(pairing)(u64 *out, const u64 *g1, const u64 *g2) {
    E12 f, e;
    QN(miller_loop)(&f, (const A1 *)g1, (const A2 *)g2, 1);
    QN(final_exp)(&e, &f);
    QN(fp12_to_std)(out, &e);
}

#undef QN
#undef Q1
#undef Q2
#undef E1
#undef E2
#undef E6
#undef E12
#undef A1
#undef A2
#undef X1
#undef X2
#undef PJ
