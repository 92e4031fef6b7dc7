/* Short Weierstrass a = 0 curve group in XYZZ coordinates (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2),
 * the representation the fastest MSMs use for buckets: a mixed add costs 8M + 2S and needs
 * no inversion. Formulas: Explicit-Formulas Database, "xyzz" for a = 0 (add-2008-s,
 * madd-2008-s, dbl-2008-s-1, mdbl-2008-s-1). Instantiated once per group by each_group.h
 * (from instances.h), which names the group: CN(x), FF(x), ET, AFF, XZ.
 * Affine points: (x, y) with all-zero limbs meaning infinity. ZZ = 0 means infinity. */
#include "port.h"

typedef struct { ET x, y; } AFF;
typedef struct { ET X, Y, ZZ, ZZZ; } XZ;

DEVICE INLINE int CN(affine_is_inf)(const AFF *p) { return FF(is_zero)(&p->x) & FF(is_zero)(&p->y); }
DEVICE INLINE void CN(set_inf)(XZ *p) { FF(zero)(&p->X); FF(one)(&p->Y); FF(zero)(&p->ZZ); FF(zero)(&p->ZZZ); }
DEVICE INLINE int CN(is_inf)(const XZ *p) { return FF(is_zero)(&p->ZZ); }
DEVICE INLINE void CN(from_affine)(XZ *r, const AFF *a) {
    if (CN(affine_is_inf)(a)) { CN(set_inf)(r); return; }
    r->X = a->x; r->Y = a->y; FF(one)(&r->ZZ); FF(one)(&r->ZZZ);
}
DEVICE INLINE void CN(affine_neg)(AFF *r, const AFF *a) {
    r->x = a->x;
    if (CN(affine_is_inf)(a)) r->y = a->y; else FF(neg)(&r->y, &a->y);
}
DEVICE INLINE void CN(neg)(XZ *r, const XZ *a) { *r = *a; FF(neg)(&r->Y, &a->Y); }

DEVICE NOINL void CN(dbl)(XZ *r, const XZ *p) {
    if (CN(is_inf)(p)) { *r = *p; return; }
    ET U, V, W, S, M, t;
    FF(dbl)(&U, &p->Y);
    FF(sqr)(&V, &U);
    FF(mul)(&W, &U, &V);
    FF(mul)(&S, &p->X, &V);
    FF(sqr)(&M, &p->X);
    FF(dbl)(&t, &M); FF(add)(&M, &M, &t);           /* M = 3 X^2 (a = 0) */
    ET X3, Y3;
    FF(sqr)(&X3, &M);
    FF(dbl)(&t, &S); FF(sub)(&X3, &X3, &t);         /* X3 = M^2 - 2S */
    FF(sub)(&t, &S, &X3); FF(mul)(&Y3, &M, &t);
    FF(mul)(&t, &W, &p->Y); FF(sub)(&Y3, &Y3, &t);  /* Y3 = M(S - X3) - W Y1 */
    FF(mul)(&r->ZZ, &V, &p->ZZ);
    FF(mul)(&r->ZZZ, &W, &p->ZZZ);
    r->X = X3; r->Y = Y3;
}

/* r = p + q (q affine). r may alias p. Handles p = inf, q = inf, p = q, p = -q. */
DEVICE NOINL void CN(add_affine)(XZ *r, const XZ *p, const AFF *q) {
    if (CN(affine_is_inf)(q)) { *r = *p; return; }
    if (CN(is_inf)(p)) { CN(from_affine)(r, q); return; }
    ET U2, S2, P, R, PP, PPP, Q, t;
    FF(mul)(&U2, &q->x, &p->ZZ);
    FF(mul)(&S2, &q->y, &p->ZZZ);
    FF(sub)(&P, &U2, &p->X);
    FF(sub)(&R, &S2, &p->Y);
    if (FF(is_zero)(&P)) {
        if (FF(is_zero)(&R)) { XZ a; CN(from_affine)(&a, q); CN(dbl)(r, &a); }
        else CN(set_inf)(r);
        return;
    }
    FF(sqr)(&PP, &P);
    FF(mul)(&PPP, &P, &PP);
    FF(mul)(&Q, &p->X, &PP);
    ET X3, Y3;
    FF(sqr)(&X3, &R);
    FF(sub)(&X3, &X3, &PPP);
    FF(dbl)(&t, &Q); FF(sub)(&X3, &X3, &t);
    FF(sub)(&t, &Q, &X3); FF(mul)(&Y3, &R, &t);
    FF(mul)(&t, &p->Y, &PPP); FF(sub)(&Y3, &Y3, &t);
    FF(mul)(&r->ZZ, &p->ZZ, &PP);
    FF(mul)(&r->ZZZ, &p->ZZZ, &PPP);
    r->X = X3; r->Y = Y3;
}

/* r = p - q (q affine), for signed bucket digits. */
DEVICE SOFT void CN(sub_affine)(XZ *r, const XZ *p, const AFF *q) {
    AFF n; CN(affine_neg)(&n, q); CN(add_affine)(r, p, &n);
}

/* r = p + q, both XYZZ. r may alias either. */
DEVICE NOINL void CN(add)(XZ *r, const XZ *p, const XZ *q) {
    if (CN(is_inf)(q)) { *r = *p; return; }
    if (CN(is_inf)(p)) { *r = *q; return; }
    ET U1, U2, S1, S2, P, R, PP, PPP, Q, t;
    FF(mul)(&U1, &p->X, &q->ZZ);
    FF(mul)(&U2, &q->X, &p->ZZ);
    FF(mul)(&S1, &p->Y, &q->ZZZ);
    FF(mul)(&S2, &q->Y, &p->ZZZ);
    FF(sub)(&P, &U2, &U1);
    FF(sub)(&R, &S2, &S1);
    if (FF(is_zero)(&P)) {
        if (FF(is_zero)(&R)) { XZ d; CN(dbl)(&d, p); *r = d; }
        else CN(set_inf)(r);
        return;
    }
    FF(sqr)(&PP, &P);
    FF(mul)(&PPP, &P, &PP);
    FF(mul)(&Q, &U1, &PP);
    ET X3, Y3, ZZ3, ZZZ3;
    FF(sqr)(&X3, &R);
    FF(sub)(&X3, &X3, &PPP);
    FF(dbl)(&t, &Q); FF(sub)(&X3, &X3, &t);
    FF(sub)(&t, &Q, &X3); FF(mul)(&Y3, &R, &t);
    FF(mul)(&t, &S1, &PPP); FF(sub)(&Y3, &Y3, &t);
    FF(mul)(&ZZ3, &p->ZZ, &q->ZZ); FF(mul)(&ZZ3, &ZZ3, &PP);
    FF(mul)(&ZZZ3, &p->ZZZ, &q->ZZZ); FF(mul)(&ZZZ3, &ZZZ3, &PPP);
    r->X = X3; r->Y = Y3; r->ZZ = ZZ3; r->ZZZ = ZZZ3;
}

/* One inversion per point; batch callers use to_affine_with_inv with a shared inverse. */
DEVICE NOINL void CN(to_affine_with_inv)(AFF *r, const XZ *p, const ET *inv_zz_zzz) {
    if (CN(is_inf)(p)) { FF(zero)(&r->x); FF(zero)(&r->y); return; }
    ET izz, izzz;
    FF(mul)(&izz, inv_zz_zzz, &p->ZZZ);   /* 1/ZZ  = ZZZ / (ZZ ZZZ) */
    FF(mul)(&izzz, inv_zz_zzz, &p->ZZ);   /* 1/ZZZ = ZZ  / (ZZ ZZZ) */
    FF(mul)(&r->x, &p->X, &izz);
    FF(mul)(&r->y, &p->Y, &izzz);
}
DEVICE NOINL void CN(to_affine)(AFF *r, const XZ *p) {
    ET t; FF(mul)(&t, &p->ZZ, &p->ZZZ); FF(inv)(&t, &t);
    CN(to_affine_with_inv)(r, p, &t);
}

/* Double-and-add over the 4-limb scalar k (standard form); used for tests and assembly. */
DEVICE NOINL void CN(scalar_mul)(XZ *r, const AFF *p, const u64 *k) {
    XZ acc; CN(set_inf)(&acc);
    for (int i = 3; i >= 0; i--)
        for (int b = 63; b >= 0; b--) {
            CN(dbl)(&acc, &acc);
            if ((k[i] >> b) & 1) CN(add_affine)(&acc, &acc, p);
        }
    *r = acc;
}
