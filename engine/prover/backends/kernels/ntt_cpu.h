/* CPU NTT, coset scaling, the fused H evaluation and sparse mat-vec over one Fr.
 * Instantiated once per Fr by each_fr.h (which names it: FIELD, FN, FT). */

static void FN(to_mont_vec)(FT *a, size_t n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) FN(to_mont)(&a[i], &a[i]);
}
static void FN(from_mont_vec)(FT *a, size_t n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) FN(from_mont)(&a[i], &a[i]);
}

/* powers[i] = g^i for i < n (Montgomery). Chunked so threads can share the work: each chunk
 * starts from g^(start) computed by exponentiation. */
static void FN(powers)(FT *pw, size_t n, const FT *g, int threads) {
    const size_t chunk = 4096;
    size_t nchunks = (n + chunk - 1) / chunk;
    #pragma omp parallel for schedule(static) num_threads(threads) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t s = c * chunk, e = s + chunk < n ? s + chunk : n;
        u64 ex[4] = { (u64)s, 0, 0, 0 };
        FT acc; FN(pow_limbs)(&acc, g, ex, 1);
        for (size_t i = s; i < e; i++) { pw[i] = acc; FN(mul)(&acc, &acc, g); }
    }
}

/* In-place radix-2 DIT NTT on Montgomery values: A[k] = sum_j a[j] w^(jk). */
static void FN(ntt_mont)(FT *a, size_t n, const FT *w, int threads) {
    if (n <= 1) return;
    int logn = 0; while (((size_t)1 << logn) < n) logn++;
    /* bit reversal permutation: each pair (i, rev(i)) is swapped by its smaller index only,
     * so the threads never touch the same element */
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 8192)
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        for (int b = 0; b < logn; b++) j |= ((i >> b) & 1) << (logn - 1 - b);
        if (i < j) { FT t = a[i]; a[i] = a[j]; a[j] = t; }
    }
    FT *tw = (FT *)malloc(sizeof(FT) * (n / 2));
    FN(powers)(tw, n / 2, w, threads);
    for (size_t m = 1; m < n; m <<= 1) {
        size_t step = n / (2 * m);
        #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 8192)
        for (size_t t = 0; t < n / 2; t++) {
            size_t blk = t / m, j = t % m;
            size_t i0 = blk * 2 * m + j, i1 = i0 + m;
            FT u = a[i0], v;
            FN(mul)(&v, &a[i1], &tw[j * step]);
            FN(add)(&a[i0], &u, &v);
            FN(sub)(&a[i1], &u, &v);
        }
    }
    free(tw);
}

/* Standard-form in/out. w: the n-th root to use (its inverse for the inverse transform);
 * scale: multiplied into every output (1/n for the inverse), or NULL. */
void FN(ntt)(u64 *a_, size_t n, const u64 *w_, const u64 *scale_, int threads) {
    FT *a = (FT *)a_, w;
    memcpy(&w, w_, sizeof(FT));
    FN(to_mont)(&w, &w);
    FN(to_mont_vec)(a, n, threads);
    FN(ntt_mont)(a, n, &w, threads);
    if (scale_) {
        FT s; memcpy(&s, scale_, sizeof(FT)); FN(to_mont)(&s, &s);
        #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
        for (size_t i = 0; i < n; i++) FN(mul)(&a[i], &a[i], &s);
    }
    FN(from_mont_vec)(a, n, threads);
}

/* a[k] *= g^k (standard form in/out). */
void FN(coset_scale)(u64 *a_, size_t n, const u64 *g_, int threads) {
    FT *a = (FT *)a_, g;
    memcpy(&g, g_, sizeof(FT)); FN(to_mont)(&g, &g);
    FT *pw = (FT *)malloc(sizeof(FT) * n);
    FN(powers)(pw, n, &g, threads);
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) {
        FT x; FN(to_mont)(&x, &a[i]); FN(mul)(&x, &x, &pw[i]); FN(from_mont)(&a[i], &x);
    }
    free(pw);
}

/* snarkjs's H on Montgomery values: for each of a, b, c evaluate on the coset shift*<w>:
 * iNTT, scale by shift^k / n, NTT; out = a*b - c there. a, b, c are clobbered. */
static void FN(h_coset_mont)(FT *out, FT *a, FT *b, FT *c, size_t n, const FT *w, const FT *wi,
                             const FT *ni, const FT *sh, int threads) {
    FT *pw = (FT *)malloc(sizeof(FT) * n);
    FN(powers)(pw, n, sh, threads);
    /* fold 1/n into the coset powers: one multiplication per element instead of two */
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) FN(mul)(&pw[i], &pw[i], ni);
    FT *vs[3] = { a, b, c };
    for (int v = 0; v < 3; v++) {
        FT *x = vs[v];
        FN(ntt_mont)(x, n, wi, threads);
        #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
        for (size_t i = 0; i < n; i++) FN(mul)(&x[i], &x[i], &pw[i]);
        FN(ntt_mont)(x, n, w, threads);
    }
    free(pw);
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) { FN(mul)(&out[i], &a[i], &b[i]); FN(sub)(&out[i], &out[i], &c[i]); }
}

/* The same on standard-form values with the roots given (standard form). */
void FN(h_coset)(u64 *out_, u64 *a_, u64 *b_, u64 *c_, size_t n, const u64 *w_,
                 const u64 *winv_, const u64 *ninv_, const u64 *shift_, int threads) {
    FT k[4];
    const u64 *given[4] = { w_, winv_, ninv_, shift_ };
    for (int i = 0; i < 4; i++) { memcpy(&k[i], given[i], sizeof(FT)); FN(to_mont)(&k[i], &k[i]); }
    FT *a = (FT *)a_, *b = (FT *)b_, *c = (FT *)c_, *o = (FT *)out_;
    FN(to_mont_vec)(a, n, threads); FN(to_mont_vec)(b, n, threads); FN(to_mont_vec)(c, n, threads);
    FN(h_coset_mont)(o, a, b, c, n, &k[0], &k[1], &k[2], &k[3], threads);
    FN(from_mont_vec)(o, n, threads);
}

/* snarkjs's domain of 2^log_n points (Montgomery): its root w = nqr^((r-1)/2^log_n), found by
 * squaring the field's 2^s-th root (s its two-adicity), w^-1, 1/n, and the coset shift H is
 * evaluated on: w_2n, or nqr^2 when 2n would exceed 2^s. */
static void FN(domain_roots)(FT *w, FT *wi, FT *ni, FT *shift, int log_n) {
    const FT root = { FR_ROOT };
    FT x; FN(to_mont)(&x, &root);
    if (log_n < FR_TWO_ADICITY) {
        for (int k = FR_TWO_ADICITY; k > log_n + 1; k--) FN(sqr)(&x, &x);
        *shift = x;
        FN(sqr)(w, &x);
    } else {
        *w = x;
        FT q; FN(zero)(&q); q.v[0] = FR_NQR;
        FN(to_mont)(&q, &q); FN(sqr)(shift, &q);
    }
    FN(inv)(wi, w);
    FT n; FN(zero)(&n); n.v[0] = (u64)1 << log_n;
    FN(to_mont)(&n, &n); FN(inv)(ni, &n);
}

/* out[i] = sum_k coeffs[k] * w[cols[k]] over row i's CSR range. Trick: Montgomery-multiplying
 * two std-form values gives a*b/R; summing those and applying to_mont once (times R^2/R)
 * gives the std-form sum with a single multiplication per nonzero. */
void FN(sparse_matvec)(u64 *out_, const i64 *row_ptr, const i64 *cols, const u64 *coeffs_,
                       const u64 *w_, size_t rows, int threads) {
    const FT *co = (const FT *)coeffs_, *w = (const FT *)w_;
    FT *o = (FT *)out_;
    #pragma omp parallel for schedule(dynamic, 256) num_threads(threads) if (rows >= 1024)
    for (size_t i = 0; i < rows; i++) {
        FT acc, t; FN(zero)(&acc);
        for (i64 k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
            FN(mul)(&t, &co[k], &w[cols[k]]);
            FN(add)(&acc, &acc, &t);
        }
        FN(to_mont)(&acc, &acc);
        o[i] = acc;
    }
}
