/* GPU Pippenger MSM over one group, for k scalar vectors over the same bases (a batch; k = 1
 * is the single MSM), in launches the host (engine/prover/backends/cuda.py) sequences:
 *   k_digits         one thread per scalar of each vector: its signed c-bit digits as sortable keys
 *   (a device sort groups every bucket's entries; a search gives each bucket's offset)
 *   k_acc_affine     one thread per chunk of at most K entries of one bucket: their XYZZ sum
 *   k_acc_xyzz       the same over partial sums, level after level, until one per bucket
 *   k_segments       per window, S threads each sum a range of buckets, weighted
 *   k_acc_xyzz       again, S segment sums to one per window
 * The host then takes the window sums to affine and weighs window w by 2^(c w) (an MSM of
 * nwin points on the CPU): one thread's inversion on the GPU costs milliseconds.
 * Chunking, not one thread per bucket, keeps the work balanced whatever the scalars: witness
 * scalars (mostly 0 and 1) put nearly every point in one bucket of the lowest window.
 * A batch is k independent MSMs sharing every launch: vector v's window w is "window" v nwin + w
 * of one MSM of k nwin windows, so its buckets never mix with another vector's and the sums
 * and reduction below run unchanged over all k nwin windows.
 * Instantiated once per group by each_group.h (which names it: CN, FF, ET, AFF, XZ). */
#include "msm_digits.h"

/* Signed c-bit digits d (msm_digits.h) of vector v's scalar i as sort keys, keys[W n + i] =
 * bucket << 32 | entry with W = v nwin + w, bucket = W half + |d| - 1 and entry = i | (d < 0) << 31;
 * a zero digit sorts last (bucket 0xffffffff) and is never read. The entry names the base only
 * (every vector reads the same bases), so n < 2^31 whatever k; the host keeps k nwin half < 2^32 - 1.
 * Scalars: (k, n, 4) standard form, one thread per (v, i). */
KERNEL CN(k_digits)(u64 *keys, const u64 *scalars, u64 n, u64 k, int c, int nwin) {
    u64 t = GID; if (t >= k * n) return;
    const u64 v = t / n, i = t % n;
    const u64 half = (u64)1 << (c - 1);
    i64 carry = 0;
    for (int w = 0; w < nwin; w++) {
        i64 d = ps_signed_digit(scalars + 4 * t, w, c, &carry);
        u64 W = v * (u64)nwin + (u64)w;
        u64 bucket = d == 0 ? 0xffffffffull : W * half + (u64)(d > 0 ? d : -d) - 1;
        keys[W * n + i] = bucket << 32 | i | (d < 0 ? 0x80000000ull : 0);
    }
}

#ifndef PS_SEGMENT_OF
#define PS_SEGMENT_OF
/* The segment holding item t: the b with off[b] <= t < off[b + 1] (off is non-decreasing,
 * off[0] = 0 and t < off[nseg]), by bisection. */
DEVICE INLINE u64 ps_segment_of(const long long *off, u64 nseg, u64 t) {
    u64 lo = 0, hi = nseg;
    while (hi - lo > 1) {
        u64 mid = lo + (hi - lo) / 2;
        if ((u64)off[mid] <= t) lo = mid; else hi = mid;
    }
    return lo;
}
/* Chunk t of a segmented sum: segment b's chunks are chunk_off[b] .. chunk_off[b+1] - 1 and
 * chunk j of it covers items off[b] + j K up to K of them, inside the segment. */
DEVICE INLINE int ps_chunk(const long long *off, const long long *chunk_off, u64 nseg, u64 K, u64 t,
                           long long *start, long long *end) {
    if (t >= (u64)chunk_off[nseg]) return 0;
    u64 b = ps_segment_of(chunk_off, nseg, t);
    *start = off[b] + (long long)((t - (u64)chunk_off[b]) * K);
    *end = *start + (long long)K < off[b + 1] ? *start + (long long)K : off[b + 1];
    return 1;
}
#endif

/* out[t] = the sum of the bases of chunk t's entries (entries sorted by bucket, in keys). */
KERNEL CN(k_acc_affine)(XZ *out, const AFF *bases, const u64 *keys, const long long *off,
                        const long long *chunk_off, u64 nseg, u64 K) {
    long long s, e;
    if (!ps_chunk(off, chunk_off, nseg, K, GID, &s, &e)) return;
    XZ acc; CN(set_inf)(&acc);
    for (long long k = s; k < e; k++) {
        u32 v = (u32)keys[k];
        AFF p = bases[v & 0x7fffffffu];
        if (v >> 31) CN(affine_neg)(&p, &p);
        CN(add_affine)(&acc, &acc, &p);
    }
    out[GID] = acc;
}

/* out[t] = the sum of chunk t's partial sums: one level of a segmented tree sum. */
KERNEL CN(k_acc_xyzz)(XZ *out, const XZ *items, const long long *off, const long long *chunk_off,
                      u64 nseg, u64 K) {
    long long s, e;
    if (!ps_chunk(off, chunk_off, nseg, K, GID, &s, &e)) return;
    XZ acc = items[s];
    for (long long k = s + 1; k < e; k++) CN(add)(&acc, &acc, &items[k]);
    out[GID] = acc;
}

/* Per window, S threads: thread s sums (j + 1) B_j over its bucket range [lo, hi) as
 * W + lo T, with T = sum B_j and W = sum (j - lo + 1) B_j by running sums from the top.
 * Bucket b is items[off[b]] when off[b + 1] > off[b], else empty. */
KERNEL CN(k_segments)(XZ *seg_out, const XZ *items, const long long *off, u64 half, int nwin, u64 S) {
    u64 t = GID; if (t >= (u64)nwin * S) return;
    u64 w = t / S, s = t % S;
    u64 per = (half + S - 1) / S;
    u64 lo = s * per < half ? s * per : half, hi = lo + per < half ? lo + per : half;
    XZ run, acc; CN(set_inf)(&run); CN(set_inf)(&acc);
    for (u64 j = hi; j > lo; j--) {
        u64 b = w * half + j - 1;
        if (off[b + 1] > off[b]) CN(add)(&run, &run, &items[off[b]]);
        CN(add)(&acc, &acc, &run);
    }
    XZ m; CN(set_inf)(&m);  /* lo * run by double-and-add over lo's bits only */
    for (int bit = 63; bit >= 0; bit--) {
        if ((lo >> bit) == 0) continue;
        CN(dbl)(&m, &m);
        if ((lo >> bit) & 1) CN(add)(&m, &m, &run);
    }
    CN(add)(&acc, &acc, &m);
    seg_out[t] = acc;
}
