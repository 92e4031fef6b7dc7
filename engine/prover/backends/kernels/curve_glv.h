/* The GLV split of a scalar, k = k1 + k2 lambda mod r with |k1|, |k2| about sqrt(r)
 * (engine/prover/params/glv_params.py derives the lattice and explains the rounding). Host only:
 * 256-bit integer arithmetic on standard-form scalars, wrapping mod 2^256, which is exact
 * here since every true result is far below 2^255 in magnitude. */
#ifndef PS_GLV_H
#define PS_GLV_H
#include "port.h"

typedef struct { u64 v[3]; int neg; } ps_glv_c3;   /* a signed constant: magnitude, sign */
typedef struct { u64 v[2]; int neg; } ps_glv_c2;
typedef struct { ps_glv_c3 g1, g2; ps_glv_c2 a1, b1, a2, b2; } ps_glv_lattice;

/* (k g + 2^255) >> 256 for k < 2^256 and g < 2^192: the rounded quotient, 3 limbs. */
static inline void ps_glv_round(u64 c[3], const u64 k[4], const u64 g[3]) {
    u64 t[7] = {0};
    for (int i = 0; i < 4; i++) {
        u64 carry = 0;
        for (int j = 0; j < 3; j++) MAC(t[i + j], carry, k[i], g[j], t[i + j]);
        t[i + 3] = carry;
    }
    unsigned char cy = 0;
    t[3] = ps_adc(t[3], (u64)1 << 63, &cy);
    for (int i = 4; i < 7; i++) t[i] = ps_adc(t[i], 0, &cy);
    c[0] = t[4]; c[1] = t[5]; c[2] = t[6];
}

/* acc -= c a (mod 2^256), c and a signed. */
static inline void ps_glv_msub(u64 acc[4], const u64 c[3], int cneg, const ps_glv_c2 *a) {
    u64 t[4] = {0};
    for (int i = 0; i < 3; i++) {
        u64 carry = 0;
        for (int j = 0; j < 2 && i + j < 4; j++) MAC(t[i + j], carry, c[i], a->v[j], t[i + j]);
        if (i + 2 < 4) t[i + 2] = carry;
    }
    unsigned char f = 0;
    if (cneg ^ a->neg) for (int i = 0; i < 4; i++) acc[i] = ps_adc(acc[i], t[i], &f);
    else for (int i = 0; i < 4; i++) acc[i] = ps_sbb(acc[i], t[i], &f);
}

/* |x| of a wrapped 256-bit value; returns whether it was negative. */
static inline int ps_glv_abs(u64 x[4]) {
    if (!(x[3] >> 63)) return 0;
    unsigned char b = 0;
    for (int i = 0; i < 4; i++) x[i] = ps_sbb(0, x[i], &b);
    return 1;
}

/* k1 = k - c1 a1 - c2 a2 and k2 = -c1 b1 - c2 b2, as magnitudes and signs. */
static inline void ps_glv_split(const ps_glv_lattice *L, const u64 k[4], u64 k1[4], int *neg1, u64 k2[4], int *neg2) {
    u64 c1[3], c2[3];
    ps_glv_round(c1, k, L->g1.v);
    ps_glv_round(c2, k, L->g2.v);
    for (int i = 0; i < 4; i++) { k1[i] = k[i]; k2[i] = 0; }
    ps_glv_msub(k1, c1, L->g1.neg, &L->a1);
    ps_glv_msub(k1, c2, L->g2.neg, &L->a2);
    ps_glv_msub(k2, c1, L->g1.neg, &L->b1);
    ps_glv_msub(k2, c2, L->g2.neg, &L->b2);
    *neg1 = ps_glv_abs(k1);
    *neg2 = ps_glv_abs(k2);
}

#endif
