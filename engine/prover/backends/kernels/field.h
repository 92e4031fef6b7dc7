/* One prime field in Montgomery form, instantiated per field by defining before inclusion:
 *   FIELD  name prefix (e.g. bls12381_fp)      NL     number of 64-bit limbs
 *   FMOD   {p limbs}   FONE {R mod p}  FR2 {R^2 mod p}  FPM2 {p-2 limbs}  FINV  -p^-1 mod 2^64
 *   FLAZY  1 when 4p < R: a Montgomery product of two values below 2p is then below 2p too
 * Everything is a loop over NL with constant bounds so the compiler fully unrolls it. */
#include "port.h"
#include "field_inverse.h"

#define FN(x) PS_CAT3(FIELD, _, x)
#define FT FN(t)

typedef struct { u64 v[NL]; } FT;

DEVICE INLINE int FN(is_zero)(const FT *a) {
    u64 acc = 0;
    UNROLL for (int i = 0; i < NL; i++) acc |= a->v[i];
    return acc == 0;
}
DEVICE INLINE int FN(eq)(const FT *a, const FT *b) {
    u64 acc = 0;
    UNROLL for (int i = 0; i < NL; i++) acc |= a->v[i] ^ b->v[i];
    return acc == 0;
}
/* 1 iff a < p as a plain integer: a canonical element (values read from files are checked). */
DEVICE INLINE int FN(is_reduced)(const FT *a) {
    const u64 p[NL] = FMOD;
    unsigned char borrow = 0;
    UNROLL for (int i = 0; i < NL; i++) (void)ps_sbb(a->v[i], p[i], &borrow);
    return borrow;
}
DEVICE INLINE void FN(zero)(FT *r) { for (int i = 0; i < NL; i++) r->v[i] = 0; }
DEVICE INLINE void FN(one)(FT *r) { const u64 o[NL] = FONE; for (int i = 0; i < NL; i++) r->v[i] = o[i]; }

/* r = a - p if a >= p (a < 2p, with an optional carry-out bit from the addition). */
DEVICE INLINE void FN(reduce_once)(FT *r, const FT *a, u64 hi) {
    const u64 p[NL] = FMOD;
    u64 t[NL];
    unsigned char borrow = 0;
    UNROLL for (int i = 0; i < NL; i++) t[i] = ps_sbb(a->v[i], p[i], &borrow);
    /* keep a when it was smaller than p (borrow and no carry-out) */
    int keep = borrow > hi;
    UNROLL for (int i = 0; i < NL; i++) r->v[i] = keep ? a->v[i] : t[i];
}

DEVICE INLINE void FN(add)(FT *r, const FT *a, const FT *b) {
    FT s;
    unsigned char c = 0;
    UNROLL for (int i = 0; i < NL; i++) s.v[i] = ps_adc(a->v[i], b->v[i], &c);
    FN(reduce_once)(r, &s, c);
}
DEVICE INLINE void FN(dbl)(FT *r, const FT *a) { FN(add)(r, a, a); }

DEVICE INLINE void FN(sub)(FT *r, const FT *a, const FT *b) {
    const u64 p[NL] = FMOD;
    u64 t[NL];
    unsigned char borrow = 0, c = 0;
    UNROLL for (int i = 0; i < NL; i++) t[i] = ps_sbb(a->v[i], b->v[i], &borrow);
    /* add p back when it went negative; the mask keeps it branch-free */
    u64 mask = 0 - (u64)borrow;
    UNROLL for (int i = 0; i < NL; i++) r->v[i] = ps_adc(t[i], p[i] & mask, &c);
}
DEVICE INLINE void FN(neg)(FT *r, const FT *a) { FT z; FN(zero)(&z); FN(sub)(r, &z, a); }

/* Montgomery multiplication r = a*b/R mod p: CIOS (Koc, Acar, Kaliski 1996) in the
 * "no-carry" form, valid when the modulus' top limb is below 2^63 - 1 (true for all four
 * fields here; native.py asserts it). The multiply and reduce passes of one outer step are
 * merged, so t needs only NL words and no overflow words: fewer registers, fewer spills. */
#if defined(PS_HAVE_MULX) && (NL == 4 || NL == 6)
/* The bmi2-adx CPU build: the same CIOS in generated mulx/adcx/adox assembly
 * (engine/prover/backends/cpu/mulx.py), two carry chains at once. */
DEVICE MULFN void FN(mul)(FT *r, const FT *a, const FT *b) {
    static const u64 p[NL] = FMOD, inv = (u64)FINV;
    FT o;
    PS_CAT(ps_mulx_mont, NL)(o.v, a->v, b->v, p, &inv);
    FN(reduce_once)(r, &o, 0);
}
#else
DEVICE MULFN void FN(mul)(FT *r, const FT *a, const FT *b) {
    const u64 p[NL] = FMOD;
    u64 t[NL];
    UNROLL for (int i = 0; i < NL; i++) t[i] = 0;
    UNROLL for (int i = 0; i < NL; i++) {
        u64 bi = b->v[i], A = 0, C = 0, lo = 0;
        MAC(t[0], A, a->v[0], bi, t[0]);
        u64 m = t[0] * (u64)FINV;
        MAC(lo, C, m, p[0], t[0]);
        (void)lo;
        UNROLL for (int j = 1; j < NL; j++) {
            MAC(t[j], A, a->v[j], bi, t[j]);
            MAC(t[j - 1], C, m, p[j], t[j]);
        }
        t[NL - 1] = C + A;
    }
    FT o;
    UNROLL for (int i = 0; i < NL; i++) o.v[i] = t[i];
    FN(reduce_once)(r, &o, 0);
}
#endif
DEVICE INLINE void FN(sqr)(FT *r, const FT *a) { FN(mul)(r, a, a); }

/* The lazy forms, for values that only feed a multiplication: with 4p < R the CIOS takes
 * operands below 2p and returns (ab + mp)/R < 2p, so the final subtraction and the sum's
 * reduction can wait for the product that needs a canonical value (a compare, a subtraction,
 * an output). Only the mulx build takes them (field.h's C CIOS is proved for reduced operands
 * only); elsewhere they are the reduced forms. */
#if defined(PS_HAVE_MULX) && (NL == 4 || NL == 6) && FLAZY
DEVICE MULFN void FN(mul_lz)(FT *r, const FT *a, const FT *b) {
    static const u64 p[NL] = FMOD, inv = (u64)FINV;
    PS_CAT(ps_mulx_mont, NL)(r->v, a->v, b->v, p, &inv);
}
DEVICE INLINE void FN(add_lz)(FT *r, const FT *a, const FT *b) {
    unsigned char c = 0;
    UNROLL for (int i = 0; i < NL; i++) r->v[i] = ps_adc(a->v[i], b->v[i], &c);
}
/* Products kept at double width, so that a sum of them pays one reduction (Fp2's Karatsuba:
 * three products, two reductions). A wide value t stands for t/R mod p once reduced. */
typedef struct { u64 v[2 * NL]; } FN(wide_t);
DEVICE INLINE void FN(mul_wide)(FN(wide_t) *r, const FT *a, const FT *b) {
    PS_CAT(ps_mulx_wide, NL)(r->v, a->v, b->v);
}
/* r = a - b, when the caller knows a >= b. */
DEVICE INLINE void FN(wide_sub)(FN(wide_t) *r, const FN(wide_t) *a, const FN(wide_t) *b) {
    unsigned char borrow = 0;
    UNROLL for (int i = 0; i < 2 * NL; i++) r->v[i] = ps_sbb(a->v[i], b->v[i], &borrow);
}
/* r = a - b (+ pR when that went negative): for a, b < pR, r < pR again. */
DEVICE INLINE void FN(wide_sub_mod)(FN(wide_t) *r, const FN(wide_t) *a, const FN(wide_t) *b) {
    const u64 p[NL] = FMOD;
    unsigned char borrow = 0, c = 0;
    UNROLL for (int i = 0; i < 2 * NL; i++) r->v[i] = ps_sbb(a->v[i], b->v[i], &borrow);
    u64 mask = 0 - (u64)borrow;
    UNROLL for (int i = 0; i < NL; i++) r->v[NL + i] = ps_adc(r->v[NL + i], p[i] & mask, &c);
}
/* t/R mod p, reduced, for t < pR: the low half's reduction (<= p) plus the high half (< p). */
DEVICE INLINE void FN(redc)(FT *r, const FN(wide_t) *t) {
    static const u64 p[NL] = FMOD, inv = (u64)FINV;
    FT u;
    PS_CAT(ps_mulx_redc, NL)(u.v, t->v, p, &inv);
    unsigned char c = 0;
    UNROLL for (int i = 0; i < NL; i++) u.v[i] = ps_adc(u.v[i], t->v[NL + i], &c);
    FN(reduce_once)(r, &u, 0);
}
#else
DEVICE INLINE void FN(mul_lz)(FT *r, const FT *a, const FT *b) { FN(mul)(r, a, b); }
DEVICE INLINE void FN(add_lz)(FT *r, const FT *a, const FT *b) { FN(add)(r, a, b); }
/* Elsewhere a "wide" product is the reduced one, and its arithmetic the field's, so that a
 * caller writes one formula for both builds. */
typedef FT FN(wide_t);
DEVICE INLINE void FN(mul_wide)(FN(wide_t) *r, const FT *a, const FT *b) { FN(mul)(r, a, b); }
DEVICE INLINE void FN(wide_sub)(FN(wide_t) *r, const FN(wide_t) *a, const FN(wide_t) *b) { FN(sub)(r, a, b); }
DEVICE INLINE void FN(wide_sub_mod)(FN(wide_t) *r, const FN(wide_t) *a, const FN(wide_t) *b) { FN(sub)(r, a, b); }
DEVICE INLINE void FN(redc)(FT *r, const FN(wide_t) *t) { *r = *t; }
#endif

DEVICE INLINE void FN(to_mont)(FT *r, const FT *a) { FT r2 = { FR2 }; FN(mul)(r, a, &r2); }
DEVICE INLINE void FN(from_mont)(FT *r, const FT *a) {
    FT one; FN(zero)(&one); one.v[0] = 1; FN(mul)(r, a, &one);
}

/* a^e for a little-endian NL-limb exponent, square-and-multiply (Montgomery in and out). */
DEVICE NOINL void FN(pow_limbs)(FT *r, const FT *a, const u64 *e, int limbs) {
    FT acc; FN(one)(&acc);
    for (int i = limbs - 1; i >= 0; i--) {
        for (int b = 63; b >= 0; b--) {
            FN(sqr)(&acc, &acc);
            if ((e[i] >> b) & 1) FN(mul)(&acc, &acc, a);
        }
    }
    *r = acc;
}
/* Fermat inversion a^(p-2); maps 0 to 0, which callers rely on for the point at infinity.
 * Sliding windows of up to 4 bits over the odd powers a, a^3, ..., a^15: one multiplication
 * per window instead of one per set bit (BLS12-381: 571 -> ~465 products). */
DEVICE SOFT void FN(inv_fermat)(FT *r, const FT *a) {
    const u64 e[NL] = FPM2;
    FT odd[8], a2, acc;
    odd[0] = *a;
    FN(sqr)(&a2, a);
    for (int k = 1; k < 8; k++) FN(mul)(&odd[k], &odd[k - 1], &a2);
    FN(one)(&acc);
    int i = 64 * NL - 1;
    while (i >= 0 && !((e[i / 64] >> (i % 64)) & 1)) i--;
    while (i >= 0) {
        if (!((e[i / 64] >> (i % 64)) & 1)) { FN(sqr)(&acc, &acc); i--; continue; }
        /* the window: bits i down to j, ending on a set bit */
        int j = i - 3 < 0 ? 0 : i - 3;
        while (!((e[j / 64] >> (j % 64)) & 1)) j++;
        unsigned w = 0;
        for (int k = i; k >= j; k--) { FN(sqr)(&acc, &acc); w = (w << 1) | ((e[k / 64] >> (k % 64)) & 1); }
        FN(mul)(&acc, &acc, &odd[w >> 1]);
        i = j - 1;
    }
    *r = acc;
}

/* 1/a, 0 -> 0 (the point at infinity relies on it). The host runs the divsteps of
 * field_inverse.h on a's Montgomery representative A R, which gives 1/(A R); two products by
 * R^2 turn that into (1/A) R. The GPU keeps Fermat. a may be lazy (below 2p). */
#ifdef __CUDACC__
DEVICE INLINE void FN(inv)(FT *r, const FT *a) { FN(inv_fermat)(r, a); }
#else
static void FN(inv)(FT *r, const FT *a) {
    static const u64 p[NL] = FMOD;
    const FT r2 = { FR2 };
    FT x, y;
    FN(reduce_once)(&y, a, 0);
    if (FN(is_zero)(&y)) { FN(zero)(r); return; }
    if (!ps_safegcd_inverse(x.v, y.v, p, NL, (u64)FINV)) { FN(inv_fermat)(r, &y); return; }
    FN(mul)(&x, &x, &r2);
    FN(mul)(r, &x, &r2);
}
#endif

#undef FT
#undef FN
#undef FIELD
#undef NL
#undef FMOD
#undef FONE
#undef FR2
#undef FPM2
#undef FINV
#undef FLAZY
