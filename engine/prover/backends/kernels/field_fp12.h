/* Fp6 = Fp2[v]/(v^3 - xi) and Fp12 = Fp6[w]/(w^2 - v), the pairing target field, so w^6 = xi
 * (xi = XI0 + u: 9 + u for BN254, 1 + u for BLS12-381). Host only. Define before inclusion:
 *   PC the curve prefix (bn128)  F1, F2 its Fp and Fp2 prefixes  XI0 the small integer above
 *   FROB {gamma_{j,k} = xi^(k (p^j - 1) / 6), j = 1..3, k = 1..5}: Fp2 Montgomery limbs.
 * An Fp12 element c0 + c1 w with c_i = a0 + a1 v + a2 v^2 holds the Fp2 coefficient of w^k
 * at k = 0: c0.a0, 2: c0.a1, 4: c0.a2, 1: c1.a0, 3: c1.a1, 5: c1.a2 (what Frobenius uses). */
#include "port.h"

#define QN(x) PS_CAT3(PC, _, x)
#define Q1(x) PS_CAT3(F1, _, x)
#define Q2(x) PS_CAT3(F2, _, x)
#define E2 Q2(t)
#define E6 QN(fp6_t)
#define E12 QN(fp12_t)

typedef struct { E2 a0, a1, a2; } E6;
typedef struct { E6 c0, c1; } E12;

/* xi a = (XI0 a0 - a1) + (XI0 a1 + a0) u; XI0 a by double-and-add, XI0 being tiny. */
static void QN(fp2_mul_xi)(E2 *r, const E2 *a) {
    E2 s = *a, t; Q2(zero)(&t);
    for (int k = XI0; k; k >>= 1) { if (k & 1) Q2(add)(&t, &t, &s); Q2(dbl)(&s, &s); }
    E2 o;
    Q1(sub)(&o.c0, &t.c0, &a->c1);
    Q1(add)(&o.c1, &t.c1, &a->c0);
    *r = o;
}
static void QN(fp2_conj)(E2 *r, const E2 *a) { r->c0 = a->c0; Q1(neg)(&r->c1, &a->c1); }
static void QN(fp2_mul_fp)(E2 *r, const E2 *a, const Q1(t) *b) { Q1(mul)(&r->c0, &a->c0, b); Q1(mul)(&r->c1, &a->c1, b); }

/* ---- Fp6 ---- */
static void QN(fp6_zero)(E6 *r) { Q2(zero)(&r->a0); Q2(zero)(&r->a1); Q2(zero)(&r->a2); }
static void QN(fp6_one)(E6 *r) { Q2(one)(&r->a0); Q2(zero)(&r->a1); Q2(zero)(&r->a2); }
static void QN(fp6_add)(E6 *r, const E6 *a, const E6 *b) { Q2(add)(&r->a0, &a->a0, &b->a0); Q2(add)(&r->a1, &a->a1, &b->a1); Q2(add)(&r->a2, &a->a2, &b->a2); }
static void QN(fp6_sub)(E6 *r, const E6 *a, const E6 *b) { Q2(sub)(&r->a0, &a->a0, &b->a0); Q2(sub)(&r->a1, &a->a1, &b->a1); Q2(sub)(&r->a2, &a->a2, &b->a2); }
static void QN(fp6_neg)(E6 *r, const E6 *a) { Q2(neg)(&r->a0, &a->a0); Q2(neg)(&r->a1, &a->a1); Q2(neg)(&r->a2, &a->a2); }
/* (a0, a1, a2) v = (xi a2, a0, a1) since v^3 = xi */
static void QN(fp6_mul_v)(E6 *r, const E6 *a) { E2 t; QN(fp2_mul_xi)(&t, &a->a2); r->a2 = a->a1; r->a1 = a->a0; r->a0 = t; }

/* Karatsuba over the cubic extension: 6 Fp2 multiplications instead of 9. */
static void QN(fp6_mul)(E6 *r, const E6 *a, const E6 *b) {
    E2 t0, t1, t2, s, u, c0, c1, c2;
    Q2(mul)(&t0, &a->a0, &b->a0); Q2(mul)(&t1, &a->a1, &b->a1); Q2(mul)(&t2, &a->a2, &b->a2);
    Q2(add)(&s, &a->a1, &a->a2); Q2(add)(&u, &b->a1, &b->a2); Q2(mul)(&c0, &s, &u);
    Q2(sub)(&c0, &c0, &t1); Q2(sub)(&c0, &c0, &t2); QN(fp2_mul_xi)(&c0, &c0); Q2(add)(&c0, &c0, &t0);
    Q2(add)(&s, &a->a0, &a->a1); Q2(add)(&u, &b->a0, &b->a1); Q2(mul)(&c1, &s, &u);
    Q2(sub)(&c1, &c1, &t0); Q2(sub)(&c1, &c1, &t1); QN(fp2_mul_xi)(&s, &t2); Q2(add)(&c1, &c1, &s);
    Q2(add)(&s, &a->a0, &a->a2); Q2(add)(&u, &b->a0, &b->a2); Q2(mul)(&c2, &s, &u);
    Q2(sub)(&c2, &c2, &t0); Q2(sub)(&c2, &c2, &t2); Q2(add)(&c2, &c2, &t1);
    r->a0 = c0; r->a1 = c1; r->a2 = c2;
}
/* Inverse through the adjugate: a^-1 = (A, B, C) / (a0 A + xi (a2 B + a1 C)). */
static void QN(fp6_inv)(E6 *r, const E6 *a) {
    E2 A, B, C, t, n;
    Q2(sqr)(&A, &a->a0); Q2(mul)(&t, &a->a1, &a->a2); QN(fp2_mul_xi)(&t, &t); Q2(sub)(&A, &A, &t);
    Q2(sqr)(&B, &a->a2); QN(fp2_mul_xi)(&B, &B); Q2(mul)(&t, &a->a0, &a->a1); Q2(sub)(&B, &B, &t);
    Q2(sqr)(&C, &a->a1); Q2(mul)(&t, &a->a0, &a->a2); Q2(sub)(&C, &C, &t);
    Q2(mul)(&n, &a->a2, &B); Q2(mul)(&t, &a->a1, &C); Q2(add)(&n, &n, &t); QN(fp2_mul_xi)(&n, &n);
    Q2(mul)(&t, &a->a0, &A); Q2(add)(&n, &n, &t);
    Q2(inv)(&n, &n);
    Q2(mul)(&r->a0, &A, &n); Q2(mul)(&r->a1, &B, &n); Q2(mul)(&r->a2, &C, &n);
}

/* ---- Fp12 ---- */
static void QN(fp12_one)(E12 *r) { QN(fp6_one)(&r->c0); QN(fp6_zero)(&r->c1); }
static int QN(fp12_is_one)(const E12 *a) {
    E12 o; QN(fp12_one)(&o);
    return memcmp(&o, a, sizeof(E12)) == 0;  /* reduced Montgomery limbs are canonical */
}
static void QN(fp12_conj)(E12 *r, const E12 *a) { r->c0 = a->c0; QN(fp6_neg)(&r->c1, &a->c1); }
/* (a0 + a1 w)(b0 + b1 w) = (a0 b0 + v a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) w */
static void QN(fp12_mul)(E12 *r, const E12 *a, const E12 *b) {
    E6 t0, t1, s, u;
    QN(fp6_mul)(&t0, &a->c0, &b->c0); QN(fp6_mul)(&t1, &a->c1, &b->c1);
    QN(fp6_add)(&s, &a->c0, &a->c1); QN(fp6_add)(&u, &b->c0, &b->c1); QN(fp6_mul)(&s, &s, &u);
    QN(fp6_sub)(&s, &s, &t0); QN(fp6_sub)(&r->c1, &s, &t1);
    QN(fp6_mul_v)(&t1, &t1); QN(fp6_add)(&r->c0, &t0, &t1);
}
/* (a0 + a1 w)^2 = ((a0 + a1)(a0 + v a1) - t - v t) + 2 t w with t = a0 a1: 2 Fp6 products. */
static void QN(fp12_sqr)(E12 *r, const E12 *a) {
    E6 t, vt, s, u;
    QN(fp6_mul)(&t, &a->c0, &a->c1);
    QN(fp6_add)(&s, &a->c0, &a->c1);
    QN(fp6_mul_v)(&u, &a->c1); QN(fp6_add)(&u, &u, &a->c0);
    QN(fp6_mul)(&s, &s, &u);
    QN(fp6_mul_v)(&vt, &t);
    QN(fp6_sub)(&s, &s, &t); QN(fp6_sub)(&r->c0, &s, &vt);
    QN(fp6_add)(&r->c1, &t, &t);
}
/* 1/(a0 + a1 w) = (a0 - a1 w) / (a0^2 - v a1^2) */
static void QN(fp12_inv)(E12 *r, const E12 *a) {
    E6 n, t;
    QN(fp6_mul)(&n, &a->c0, &a->c0); QN(fp6_mul)(&t, &a->c1, &a->c1); QN(fp6_mul_v)(&t, &t);
    QN(fp6_sub)(&n, &n, &t); QN(fp6_inv)(&n, &n);
    QN(fp6_mul)(&r->c0, &a->c0, &n); QN(fp6_mul)(&t, &a->c1, &n); QN(fp6_neg)(&r->c1, &t);
}

static const u64 QN(frob_consts)[3][5][2 * (sizeof(Q1(t)) / 8)] = FROB;
static void QN(frob_const)(E2 *g, int j, int k) { memcpy(g, QN(frob_consts)[j - 1][k - 1], sizeof(E2)); }

/* f^(p^j), j = 1..3: (g w^k)^(p^j) = g^(p^j) w^k xi^(k (p^j - 1) / 6), and g^(p^j) is the
 * conjugate for odd j. */
static void QN(fp12_frob)(E12 *r, const E12 *a, int j) {
    const E2 *in[6] = { &a->c0.a0, &a->c1.a0, &a->c0.a1, &a->c1.a1, &a->c0.a2, &a->c1.a2 };
    E2 *out[6] = { &r->c0.a0, &r->c1.a0, &r->c0.a1, &r->c1.a1, &r->c0.a2, &r->c1.a2 };
    E2 v[6];
    for (int k = 0; k < 6; k++) {
        if (j & 1) QN(fp2_conj)(&v[k], in[k]); else v[k] = *in[k];
        if (k) { E2 g; QN(frob_const)(&g, j, k); Q2(mul)(&v[k], &v[k], &g); }
    }
    for (int k = 0; k < 6; k++) *out[k] = v[k];
}

#undef QN
#undef Q1
#undef Q2
#undef E2
#undef E6
#undef E12
