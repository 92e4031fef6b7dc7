/* GPU kernels over one scalar field (NTT building blocks). One thread per element or
 * butterfly; the host (engine/prover/backends/cuda.py) sequences the launches on a stream.
 * Instantiated once per Fr by each_fr.h (which names it: FIELD, FN, FT). */
KERNEL FN(k_to_mont)(FT *a, u64 n) {
    u64 i = GID; if (i < n) FN(to_mont)(&a[i], &a[i]);
}
KERNEL FN(k_from_mont)(FT *a, u64 n) {
    u64 i = GID; if (i < n) FN(from_mont)(&a[i], &a[i]);
}
/* out[i] = g^i (Montgomery g), 64 consecutive powers per thread from one exponentiation. */
KERNEL FN(k_powers)(FT *out, const FT *g, u64 n) {
    u64 s = GID * 64;
    if (s >= n) return;
    u64 e[1] = { s };
    FT acc; FN(pow_limbs)(&acc, g, e, 1);
    for (u64 i = s; i < n && i < s + 64; i++) { out[i] = acc; FN(mul)(&acc, &acc, g); }
}
KERNEL FN(k_bitrev)(FT *a, u64 n, int logn) {
    u64 i = GID; if (i >= n) return;
    u64 j = ps_brev64(i) >> (64 - logn);
    if (i < j) { FT t = a[i]; a[i] = a[j]; a[j] = t; }
}
/* One radix-2 DIT stage with half-size m; tw[k] = w^k for k < n/2. */
KERNEL FN(k_ntt_stage)(FT *a, const FT *tw, u64 n, u64 m) {
    u64 t = GID; if (t >= n / 2) return;
    u64 blk = t / m, j = t % m, step = n / (2 * m);
    u64 i0 = blk * 2 * m + j, i1 = i0 + m;
    FT u = a[i0], v;
    FN(mul)(&v, &a[i1], &tw[j * step]);
    FN(add)(&a[i0], &u, &v);
    FN(sub)(&a[i1], &u, &v);
}
/* Two radix-2 DIT stages at once, half-sizes m and 2m, over groups of 4m elements: thread
 * (group, j) owns e0..e3 = base + j + {0, m, 2m, 3m}. Stage m pairs (e0, e1) and (e2, e3), both
 * with w^(j n/2m); stage 2m pairs (e0, e2) with w^(j n/4m) and (e1, e3) with w^((j+m) n/4m).
 * Half the launches and passes over memory of k_ntt_stage. tw[k] = w^k for k < n/2. */
KERNEL FN(k_ntt_stage2)(FT *a, const FT *tw, u64 n, u64 m) {
    u64 t = GID; if (t >= n / 4) return;
    u64 grp = t / m, j = t % m, q = n / (4 * m);
    u64 e0 = grp * 4 * m + j, e1 = e0 + m, e2 = e1 + m, e3 = e2 + m;
    FT x0 = a[e0], x1, x2 = a[e2], x3, v;
    FN(mul)(&x1, &a[e1], &tw[2 * j * q]);
    FN(mul)(&x3, &a[e3], &tw[2 * j * q]);
    FN(sub)(&v, &x0, &x1); FN(add)(&x0, &x0, &x1); x1 = v;
    FN(sub)(&v, &x2, &x3); FN(add)(&x2, &x2, &x3); x3 = v;
    FN(mul)(&x2, &x2, &tw[j * q]);
    FN(mul)(&x3, &x3, &tw[(j + m) * q]);
    FN(add)(&a[e0], &x0, &x2); FN(sub)(&a[e2], &x0, &x2);
    FN(add)(&a[e1], &x1, &x3); FN(sub)(&a[e3], &x1, &x3);
}
KERNEL FN(k_pointwise_mul)(FT *a, const FT *b, u64 n) {
    u64 i = GID; if (i < n) FN(mul)(&a[i], &a[i], &b[i]);
}
KERNEL FN(k_scale)(FT *a, const FT *s, u64 n) {
    u64 i = GID; if (i < n) FN(mul)(&a[i], &a[i], s);
}
/* out = a*b - c, then back to standard form (the H evaluations snarkjs feeds its H MSM). */
KERNEL FN(k_h_final)(FT *out, const FT *a, const FT *b, const FT *c, u64 n) {
    u64 i = GID; if (i >= n) return;
    FT t; FN(mul)(&t, &a[i], &b[i]); FN(sub)(&t, &t, &c[i]); FN(from_mont)(&out[i], &t);
}

