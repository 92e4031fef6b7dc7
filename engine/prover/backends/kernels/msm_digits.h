/* Signed-digit recoding of 256-bit scalars for Pippenger's bucket method, one definition for
 * the CPU and GPU MSMs. The scalar (4 limbs, standard form) is cut into c-bit windows; a
 * window value above 2^(c-1) becomes v - 2^c and carries 1 into the next window, so every
 * digit lies in [-2^(c-1), 2^(c-1)]: half the buckets, since negating an affine point is free.
 * ceil(257 / c) windows cover the 256 bits plus the final carry. */
#ifndef PS_DIGITS_H
#define PS_DIGITS_H
#include "port.h"

/* Digit of window w of k; *carry comes in from window w - 1 and goes out to window w + 1
 * (start it at 0 and visit the windows in order). */
DEVICE INLINE i64 ps_signed_digit(const u64 *k, int w, int c, i64 *carry) {
    const u64 mask = ((u64)1 << c) - 1;
    const i64 half = (i64)1 << (c - 1);
    int bit = w * c, limb = bit >> 6, sh = bit & 63;
    u64 v = 0;
    if (limb < 4) {
        v = k[limb] >> sh;
        if (sh + c > 64 && limb + 1 < 4) v |= k[limb + 1] << (64 - sh);
    }
    i64 d = (i64)(v & mask) + *carry;
    if (d > half) { d -= (i64)1 << c; *carry = 1; } else *carry = 0;
    return d;
}

#endif
