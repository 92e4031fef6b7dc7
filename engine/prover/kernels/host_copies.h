/* Fixed-base precomputation for a key that proves many times: T shifted copies of its bases,
 * Q_t = 2^(t s) P for t < T, so that sum k_i P_i = sum_{i,t} k_it Q_ti with k_it the t-th
 * s-bit slice of k_i. The MSM then runs over T n points whose scalars are s bits long: the
 * bucket additions stay n b / c, but the windows (each a bucket reduction and c doublings)
 * are T times fewer, and the larger point count affords a wider window. Part of host_group.h
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

/* An MSM over the copies table, planned (host_group.h's pip over the split points): each
 * scalar split by GLV (glv.h) and each half cut into copies slices of shift bits, each slice
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
