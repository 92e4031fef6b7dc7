/* Fixed-base precomputation for a key that proves many times: T shifted copies of its bases,
 * Q_t = 2^(t s) P for t < T, so that sum k_i P_i = sum_{i,t} k_it Q_ti with k_it the t-th
 * s-bit slice of k_i. The MSM then runs over T n points whose scalars are s bits long: the
 * bucket additions stay n b / c, but the windows (each a bucket reduction and c doublings)
 * are T times fewer, and the larger point count affords a wider window. Part of msm_cpu.h
 * (one instance per group); it slices the GLV halves, so s is a half's bound / T. */

/* Bits [lo, lo + len) of a 256-bit k, as a 256-bit value (len <= 256). */
static inline void CN(bit_slice)(u64 out[4], const u64 k[4], int lo, int len) {
    for (int l = 0; l < 4; l++) {
        int bit = lo + 64 * l, limb = bit >> 6, sh = bit & 63;
        u64 v = 0;
        if (bit < lo + len && limb < 4) {
            v = k[limb] >> sh;
            if (sh && limb + 1 < 4) v |= k[limb + 1] << (64 - sh);
            int left = lo + len - bit;
            if (left < 64) v &= ((u64)1 << left) - 1;
        }
        out[l] = v;
    }
}

/* out block t (n points each) = 2^(t shift) bases: shift doublings per copy, then one batched
 * normalisation. The point at infinity stays all-zero. */
void CN(shifted_copies)(u64 *out_, const u64 *bases_, size_t n, int copies, int shift, int threads) {
    if (threads <= 0) threads = 1;
    AFF *out = (AFF *)out_;
    memcpy(out, bases_, sizeof(AFF) * n);
    XZ *acc = (XZ *)malloc(sizeof(XZ) * (n ? n : 1));
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 256)
    for (size_t i = 0; i < n; i++) CN(from_affine)(&acc[i], &out[i]);
    for (int t = 1; t < copies; t++) {
        #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 256)
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < shift; k++) CN(dbl)(&acc[i], &acc[i]);
        CN(batch_to_affine_par)(out + (size_t)t * n, acc, n, threads);
    }
    free(acc);
}

/* An MSM over the copies table, planned (msm_cpu.h's pip over the split points): each
 * scalar split by GLV (curve_glv.h) and each half cut into copies slices of shift bits, each slice
 * paired with its copy, or phi of it: an MSM over 2 copies n points. */
typedef struct { CN(pip) pip; AFF *pts; } CN(msm_job);

static void CN(job_plan)(CN(msm_job) *j, const u64 *table_, const u64 *scalars, const int64_t *rows, size_t n,
                         size_t stride, int copies, int shift, int threads) {
    static const ps_glv_lattice lattice = PS_CAT(GLV_TAG, _LATTICE);
    const AFF *tab = (const AFF *)table_;
    if (threads <= 0) threads = 1;
    size_t per = (size_t)2 * copies, m = per * n;
    AFF *pts = (AFF *)malloc(sizeof(AFF) * (m ? m : 1));
    u64 *ks = (u64 *)malloc(sizeof(u64) * 4 * (m ? m : 1));
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 1024)
    for (size_t i = 0; i < n; i++) {
        size_t j = rows ? (size_t)rows[i] : i;
        u64 k[2][4];
        int neg[2];
        ps_glv_split(&lattice, scalars + 4 * j, k[0], &neg[0], k[1], &neg[1]);
        for (int t = 0; t < copies; t++) {
            const AFF *q = &tab[(size_t)t * stride + j];
            for (int h = 0; h < 2; h++) {
                size_t o = i * per + (size_t)t * 2 + h;
                AFF p = *q;
                if (h) CN(glv_phi)(&p, q);
                if (neg[h]) CN(affine_neg)(&pts[o], &p); else pts[o] = p;
                CN(bit_slice)(ks + 4 * o, k[h], t * shift, shift);
            }
        }
    }
    CN(pip_plan)(&j->pip, pts, ks, m, threads);
    free(ks);   /* the digits hold all the scalars say from here on */
    j->pts = pts;
}

static void CN(job_finish)(CN(msm_job) *j, u64 *out) {
    CN(pip_finish)(&j->pip, out);
    free(j->pts);
}

/* sum_i k_{r_i} P_{r_i} from the copies table (copies blocks of stride points, from
 * shifted_copies) over the rows r (n of them; rows NULL: the first n). One copy of 256-bit
 * slices is the plain GLV MSM (CN(msm)). */
void CN(msm_copies)(u64 *out, const u64 *table_, const u64 *scalars, const int64_t *rows, size_t n,
                    size_t stride, int copies, int shift, int threads) {
    if (threads <= 0) threads = 1;
    CN(msm_job) j;
    CN(job_plan)(&j, table_, scalars, rows, n, stride, copies, shift, threads);
    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int w = 0; w < j.pip.nwin; w++) CN(pip_window)(&j.pip, w);
    CN(job_finish)(&j, out);
}

/* The batch: k scalar vectors (vector v is scalars + 4 vlen v) over the same table, in one
 * pass over the points per window. The split points (copy t of base j, or phi of it) are laid
 * out once and not negated: each vector's GLV signs go into its own digits (negated digits
 * sum to -k), so every window reads each point once and adds it into the k vectors' bucket
 * sets. The windows are the widest vector's; each result is the same group element as
 * msm_copies of that vector alone (an affine point has one representation), so a proof made
 * from them is byte-identical. */
static void CN(sum_buckets_into)(XZ *acc, const XZ *xb, const AFF *ab, const unsigned char *occ, size_t half) {
    XZ run; CN(set_inf)(&run); CN(set_inf)(acc);
    for (size_t j = half; j-- > 0;) {
        XZ b = xb[j];
        if (occ && occ[j]) CN(add_affine)(&b, &b, &ab[j]);
        CN(add)(&run, &run, &b);
        CN(add)(acc, acc, &run);
    }
}

static void CN(window_multi)(XZ *res, const AFF *bases, const int32_t *const *d, size_t k, size_t n, size_t half,
                             int batch) {
    CN(buckets) *s = (CN(buckets) *)calloc(k, sizeof(CN(buckets)));
    for (size_t v = 0; v < k; v++) {
        s[v].bases = bases;
        s[v].ab = (AFF *)malloc(sizeof(AFF) * half); s[v].xb = (XZ *)malloc(sizeof(XZ) * half);
        s[v].occ = (unsigned char *)calloc(half, 1);
        s[v].stamp = (uint32_t *)calloc(half, sizeof(uint32_t));
        if (batch) {
            s[v].pd = (CN(pending) *)malloc(sizeof(CN(pending)) * batch);
            s[v].dq = (CN(pending) *)malloc(sizeof(CN(pending)) * batch);
            s[v].den = (ET *)malloc(sizeof(ET) * batch); s[v].pref = (ET *)malloc(sizeof(ET) * batch);
        }
        s[v].cur = 1; s[v].batch = batch;
        for (size_t j = 0; j < half; j++) CN(set_inf)(&s[v].xb[j]);
    }
    for (size_t i = 0; i < n; i++) {
        if (i + 8 < n) __builtin_prefetch(&bases[i + 8]);
        if (CN(affine_is_inf)(&bases[i])) continue;
        for (size_t v = 0; v < k; v++) {
            int32_t x = d[v][i];
            if (x == 0) continue;
            CN(pending) e = { (uint32_t)(x > 0 ? x : -x) - 1, x > 0 ? (int32_t)i : -(int32_t)i - 1 };
            if (batch) CN(add_to_bucket)(&s[v], e);
            else CN(add_xyzz_bucket)(&s[v], e);
        }
    }
    for (size_t v = 0; v < k; v++) {
        if (batch) CN(drain_buckets)(&s[v]);
        CN(sum_buckets_into)(&res[v], s[v].xb, s[v].ab, batch ? s[v].occ : NULL, half);
        free(s[v].ab); free(s[v].xb); free(s[v].occ); free(s[v].stamp);
        free(s[v].pd); free(s[v].dq); free(s[v].den); free(s[v].pref);
    }
    free(s);
}

void CN(msm_copies_batch)(u64 *out, const u64 *table_, const u64 *scalars, size_t vlen, size_t k,
                          const int64_t *rows, size_t n, size_t stride, int copies, int shift, int threads) {
    static const ps_glv_lattice lattice = PS_CAT(GLV_TAG, _LATTICE);
    const AFF *tab = (const AFF *)table_;
    if (threads <= 0) threads = 1;
    size_t per = (size_t)2 * copies, m = per * n, mm = m ? m : 1;
    AFF *pts = (AFF *)malloc(sizeof(AFF) * mm);
    u64 *ks = (u64 *)malloc(sizeof(u64) * 4 * mm * k);
    unsigned char *sg = (unsigned char *)malloc(mm * k);
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 1024)
    for (size_t i = 0; i < n; i++) {
        size_t j = rows ? (size_t)rows[i] : i;
        for (int t = 0; t < copies; t++) {
            const AFF *q = &tab[(size_t)t * stride + j];
            size_t o = i * per + (size_t)t * 2;
            pts[o] = *q;
            CN(glv_phi)(&pts[o + 1], q);
        }
        for (size_t v = 0; v < k; v++) {
            u64 h2[2][4];
            int neg[2];
            ps_glv_split(&lattice, scalars + 4 * (v * vlen + j), h2[0], &neg[0], h2[1], &neg[1]);
            for (int t = 0; t < copies; t++)
                for (int h = 0; h < 2; h++) {
                    size_t o = i * per + (size_t)t * 2 + h;
                    CN(bit_slice)(ks + 4 * (v * m + o), h2[h], t * shift, shift);
                    sg[v * m + o] = (unsigned char)neg[h];
                }
        }
    }
    int bits = 0;
    for (size_t v = 0; v < k; v++) {
        int b = CN(scalar_bits)(ks + 4 * v * m, m, threads);
        if (b > bits) bits = b;
    }
    if (bits == 0) bits = 1;
    int c = CN(msm_window)(m), nwin = (bits + c) / c;
    size_t half = (size_t)1 << (c - 1), top_half = (size_t)1 << (bits - (nwin - 1) * c);
    if (top_half > half) top_half = half;
    int32_t *digits = (int32_t *)malloc(sizeof(int32_t) * (size_t)nwin * mm * k);
    for (size_t v = 0; v < k; v++) {
        int32_t *dv = digits + (size_t)nwin * m * v;
        CN(signed_digits)(dv, ks + 4 * v * m, m, c, nwin, threads);
        #pragma omp parallel for schedule(static) num_threads(threads) if (m >= 4096)
        for (size_t o = 0; o < m; o++)
            if (sg[v * m + o])
                for (int w = 0; w < nwin; w++) dv[(size_t)w * m + o] = -dv[(size_t)w * m + o];
    }
    free(ks); free(sg);
    XZ *wins = (XZ *)malloc(sizeof(XZ) * (size_t)nwin * k);   /* wins[w k + v] */
    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int w = 0; w < nwin; w++) {
        const int32_t **d = (const int32_t **)malloc(sizeof(int32_t *) * k);
        for (size_t v = 0; v < k; v++) d[v] = digits + (size_t)nwin * m * v + (size_t)w * m;
        size_t hw = w == nwin - 1 ? top_half : half;
        CN(window_multi)(wins + (size_t)w * k, pts, d, k, m, hw, CN(msm_batch)(hw));
        free(d);
    }
    for (size_t v = 0; v < k; v++) {
        XZ r = wins[(size_t)(nwin - 1) * k + v];
        for (int w = nwin - 2; w >= 0; w--) {
            for (int b = 0; b < c; b++) CN(dbl)(&r, &r);
            CN(add)(&r, &r, &wins[(size_t)w * k + v]);
        }
        AFF a; CN(to_affine)(&a, &r);
        memcpy(out + v * (sizeof(AFF) / sizeof(u64)), &a, sizeof(AFF));
    }
    free(wins); free(digits); free(pts);
}
