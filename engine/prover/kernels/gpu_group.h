/* GPU Pippenger MSM over one group. Pipeline (host: gpu.py):
 *   k_digits   one thread per scalar: signed c-bit digits -> (bucket key, signed point index)
 *   (cupy argsort by key groups every bucket's points together; searchsorted gives offsets)
 *   k_buckets  one thread per bucket: XYZZ sum of its points (mixed adds)
 *   k_segments per window, S threads each reduce a contiguous bucket range to
 *              W + lo*S_sum (sum_j (j+1) B_j restricted to the range)
 *   k_combine  one thread: sum segments per window, Horner over windows, to affine.
 * Instantiated once per group by each_group.h (which names it: CN, FF, ET, AFF, XZ). */
#include "digits.h"
#define GID ((u64)blockIdx.x * blockDim.x + threadIdx.x)

/* Signed c-bit digits d (digits.h) as sort keys: keys[w*n + i] = w*half + |d| - 1
 * (0xffffffff when d = 0: sorts last, never read); vals[w*n + i] = i | (d < 0) << 31.
 * Scalars: (n, 4) standard form, n < 2^31. */
extern "C" __global__ void CN(k_digits)(u32 *keys, u32 *vals, const u64 *scalars, u64 n, int c, int nwin) {
    u64 i = GID; if (i >= n) return;
    const u32 half = (u32)1 << (c - 1);
    i64 carry = 0;
    for (int w = 0; w < nwin; w++) {
        i64 d = ps_signed_digit(scalars + 4 * i, w, c, &carry);
        u64 o = (u64)w * n + i;
        if (d == 0) { keys[o] = 0xffffffffu; vals[o] = 0; }
        else {
            u32 b = (u32)((d > 0 ? d : -d) - 1);
            keys[o] = (u32)w * half + b;
            vals[o] = (u32)i | (d < 0 ? 0x80000000u : 0u);
        }
    }
}

extern "C" __global__ void CN(k_buckets)(XZ *buckets, const AFF *bases, const u32 *vals,
                                         const long long *starts, u64 nbuckets) {
    u64 b = GID; if (b >= nbuckets) return;
    XZ acc; CN(set_inf)(&acc);
    for (long long k = starts[b]; k < starts[b + 1]; k++) {
        u32 v = vals[k];
        AFF p = bases[v & 0x7fffffffu];
        if (v >> 31) CN(affine_neg)(&p, &p);
        CN(add_affine)(&acc, &acc, &p);
    }
    buckets[b] = acc;
}

/* seg_out[w*S + s] = sum_{j in [lo,hi)} (j+1) B_j, computed as W + lo*T where
 * T = sum B_j and W = sum (j - lo + 1) B_j by running sums from the top of the range. */
extern "C" __global__ void CN(k_segments)(XZ *seg_out, const XZ *buckets, u64 half, int nwin, u64 S) {
    u64 t = GID; if (t >= (u64)nwin * S) return;
    u64 w = t / S, s = t % S;
    u64 per = (half + S - 1) / S;
    u64 lo = s * per, hi = lo + per < half ? lo + per : half;
    XZ run, acc; CN(set_inf)(&run); CN(set_inf)(&acc);
    const XZ *B = buckets + w * half;
    for (u64 j = hi; j > lo; j--) { CN(add)(&run, &run, &B[j - 1]); CN(add)(&acc, &acc, &run); }
    /* acc += lo * run, double-and-add over the bits of lo */
    XZ m; CN(set_inf)(&m);
    for (int bit = 63; bit >= 0; bit--) {
        CN(dbl)(&m, &m);
        if ((lo >> bit) & 1) CN(add)(&m, &m, &run);
    }
    CN(add)(&acc, &acc, &m);
    seg_out[t] = acc;
}

extern "C" __global__ void CN(k_combine)(AFF *out, const XZ *seg, int nwin, u64 S, int c) {
    if (GID != 0) return;
    XZ r; CN(set_inf)(&r);
    for (int w = nwin - 1; w >= 0; w--) {
        for (int k = 0; k < c; k++) CN(dbl)(&r, &r);
        for (u64 s = 0; s < S; s++) CN(add)(&r, &r, &seg[(u64)w * S + s]);
    }
    CN(to_affine)(out, &r);
}

#undef GID
