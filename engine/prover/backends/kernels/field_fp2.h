/* Fp2 = Fp[u]/(u^2 + 1), the G2 coordinate field of both BN254 and BLS12-381.
 * Define FIELD (e.g. bls12381_fp2) and BASE (e.g. bls12381_fp) before inclusion; exposes the
 * same function names as field.h so curve.h can be instantiated over either. */
#include "port.h"

#define FN(x) PS_CAT3(FIELD, _, x)
#define BN(x) PS_CAT3(BASE, _, x)
#define FT FN(t)
#define BT BN(t)

typedef struct { BT c0, c1; } FT;

DEVICE INLINE int FN(is_zero)(const FT *a) { return BN(is_zero)(&a->c0) & BN(is_zero)(&a->c1); }
DEVICE INLINE int FN(eq)(const FT *a, const FT *b) { return BN(eq)(&a->c0, &b->c0) & BN(eq)(&a->c1, &b->c1); }
DEVICE INLINE void FN(zero)(FT *r) { BN(zero)(&r->c0); BN(zero)(&r->c1); }
DEVICE INLINE void FN(one)(FT *r) { BN(one)(&r->c0); BN(zero)(&r->c1); }
DEVICE INLINE void FN(add)(FT *r, const FT *a, const FT *b) { BN(add)(&r->c0, &a->c0, &b->c0); BN(add)(&r->c1, &a->c1, &b->c1); }
DEVICE INLINE void FN(sub)(FT *r, const FT *a, const FT *b) { BN(sub)(&r->c0, &a->c0, &b->c0); BN(sub)(&r->c1, &a->c1, &b->c1); }
DEVICE INLINE void FN(dbl)(FT *r, const FT *a) { FN(add)(r, a, a); }
DEVICE INLINE void FN(neg)(FT *r, const FT *a) { BN(neg)(&r->c0, &a->c0); BN(neg)(&r->c1, &a->c1); }

/* Karatsuba: 3 base multiplications. (a0 + a1 u)(b0 + b1 u) = (a0b0 - a1b1) + ((a0+a1)(b0+b1) - a0b0 - a1b1) u.
 * The sums only feed a multiplication, so they stay unreduced where the base field allows, and
 * the products stay double-width where it has them (field.h), one reduction per coefficient:
 * s0 s1 - a0b0 - a1b1 is then exactly a0b1 + a1b0, below 2p^2 < pR, and a0b0 - a1b1 is lifted
 * by pR when negative, so both are valid inputs to redc. r may alias a or b: it is written last. */
DEVICE SOFT void FN(mul)(FT *r, const FT *a, const FT *b) {
    BN(wide_t) t0, t1, m;
    BT s0, s1;
    BN(add_lz)(&s0, &a->c0, &a->c1);
    BN(add_lz)(&s1, &b->c0, &b->c1);
    BN(mul_wide)(&m, &s0, &s1);
    BN(mul_wide)(&t0, &a->c0, &b->c0);
    BN(mul_wide)(&t1, &a->c1, &b->c1);
    BN(wide_sub)(&m, &m, &t0);
    BN(wide_sub)(&m, &m, &t1);
    BN(wide_sub_mod)(&t0, &t0, &t1);
    BN(redc)(&r->c1, &m);
    BN(redc)(&r->c0, &t0);
}
/* (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u: two base multiplications. */
DEVICE SOFT void FN(sqr)(FT *r, const FT *a) {
    BT s, d, m;
    BN(add_lz)(&s, &a->c0, &a->c1);
    BN(sub)(&d, &a->c0, &a->c1);
    BN(mul)(&m, &a->c0, &a->c1);
    BN(mul)(&r->c0, &s, &d);
    BN(dbl)(&r->c1, &m);
}
/* No lazy form over Fp2: its products end in subtractions, which need reduced operands. */
DEVICE INLINE void FN(mul_lz)(FT *r, const FT *a, const FT *b) { FN(mul)(r, a, b); }
/* 1/(a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); 0 maps to 0. */
DEVICE NOINL void FN(inv)(FT *r, const FT *a) {
    BT n, t;
    BN(sqr)(&n, &a->c0);
    BN(sqr)(&t, &a->c1);
    BN(add)(&n, &n, &t);
    BN(inv)(&n, &n);
    BN(mul)(&r->c0, &a->c0, &n);
    BN(mul)(&t, &a->c1, &n);
    BN(neg)(&r->c1, &t);
}
DEVICE INLINE void FN(to_mont)(FT *r, const FT *a) { BN(to_mont)(&r->c0, &a->c0); BN(to_mont)(&r->c1, &a->c1); }
DEVICE INLINE void FN(from_mont)(FT *r, const FT *a) { BN(from_mont)(&r->c0, &a->c0); BN(from_mont)(&r->c1, &a->c1); }

#undef FT
#undef BT
#undef FN
#undef BN
#undef FIELD
#undef BASE
