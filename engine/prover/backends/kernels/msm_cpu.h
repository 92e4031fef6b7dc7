/* CPU entry points over one group: Pippenger MSM, fixed-base batches, batch normalisation.
 * Instantiated once per group by each_group.h (which names it: CN, FF, ET, AFF, XZ).
 * Points cross as affine Montgomery limbs. */
#include "msm_digits.h"

/* Montgomery's trick: one inversion for the whole batch. Infinity stays all-zero. */
static void CN(batch_to_affine)(AFF *out, const XZ *in, size_t n) {
    if (n == 0) return;
    ET *pref = (ET *)malloc(sizeof(ET) * n);
    ET acc, t; FF(one)(&acc);
    for (size_t i = 0; i < n; i++) {
        pref[i] = acc;
        if (!CN(is_inf)(&in[i])) { FF(mul)(&t, &in[i].ZZ, &in[i].ZZZ); FF(mul)(&acc, &acc, &t); }
    }
    FF(inv)(&acc, &acc);
    for (size_t i = n; i-- > 0;) {
        if (CN(is_inf)(&in[i])) { FF(zero)(&out[i].x); FF(zero)(&out[i].y); continue; }
        ET inv_i; FF(mul)(&inv_i, &acc, &pref[i]);     /* 1/(ZZ_i ZZZ_i) */
        FF(mul)(&t, &in[i].ZZ, &in[i].ZZZ); FF(mul)(&acc, &acc, &t);
        CN(to_affine_with_inv)(&out[i], &in[i], &inv_i);
    }
    free(pref);
}

static void CN(batch_to_affine_par)(AFF *out, const XZ *in, size_t n, int threads) {
    const size_t chunk = 1024;
    size_t nch = (n + chunk - 1) / chunk;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (nch > 1)
    for (size_t c = 0; c < nch; c++) {
        size_t s = c * chunk, e = s + chunk < n ? s + chunk : n;
        CN(batch_to_affine)(out + s, in + s, e - s);
    }
}

/* Window width: about ln(n) + 2 on the CPU (what balances n bucket adds per window against
 * 2^c bucket-reduction adds), clamped for tiny and huge inputs. */
int CN(msm_window)(size_t n) {
    if (n < 32) return 3;
    int lg = 0; while (((size_t)1 << (lg + 1)) <= n) lg++;
    int c = (int)(lg * 0.69314718) + 2;
    return c > 16 ? 16 : c;
}

/* Signed c-bit digits (msm_digits.h), window-major: digits[w*n + i]. */
static void CN(signed_digits)(int32_t *digits, const u64 *scalars, size_t n, int c, int nwin, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) {
        i64 carry = 0;
        for (int w = 0; w < nwin; w++)
            digits[(size_t)w * n + i] = (int32_t)ps_signed_digit(scalars + 4 * i, w, c, &carry);
    }
}

/* One window's buckets by XYZZ mixed additions (8M + 2S each): small windows, where a
 * batch-affine pass has too few buckets to fill its batches. Returns sum_j (j+1) * b[j]. */
static XZ CN(window_xyzz)(const AFF *bases, const int32_t *d, size_t n, size_t half) {
    XZ *b = (XZ *)malloc(sizeof(XZ) * half);
    for (size_t j = 0; j < half; j++) CN(set_inf)(&b[j]);
    for (size_t i = 0; i < n; i++) {
        /* the bucket table is bigger than L1: fetch a few iterations ahead */
        if (i + 8 < n) {
            int32_t y = d[i + 8];
            if (y) __builtin_prefetch(&b[(y > 0 ? y : -y) - 1], 1);
            __builtin_prefetch(&bases[i + 8]);
        }
        int32_t x = d[i];
        if (x > 0) CN(add_affine)(&b[x - 1], &b[x - 1], &bases[i]);
        else if (x < 0) CN(sub_affine)(&b[-x - 1], &b[-x - 1], &bases[i]);
    }
    /* sum_j (j+1) * b[j] by running sums from the top bucket down */
    XZ run, acc; CN(set_inf)(&run); CN(set_inf)(&acc);
    for (size_t j = half; j-- > 0;) { CN(add)(&run, &run, &b[j]); CN(add)(&acc, &acc, &run); }
    free(b);
    return acc;
}

/* Batch-affine accumulation (the method of gnark and of Aztec's barretenberg): buckets are
 * kept affine, and up to `batch` pending additions, each into a different bucket, share one
 * inversion by Montgomery's trick, so an addition costs 5M + 1S plus 1/batch of an
 * inversion instead of a mixed XYZZ addition's 8M + 2S. An addition whose bucket already
 * waits in this batch is deferred to the next one (a random digit hits a waiting bucket about
 * one time in ten, so falling back to XYZZ there cost a fifth of the window); only what the
 * batch cannot take at all (the bucket's x: a doubling or a cancellation), a full deferral
 * queue or the last few stragglers go to a second, XYZZ bucket by the general mixed
 * formula, which handles every case. Bucket j is the sum of both. */
typedef struct { uint32_t b; int32_t i; } CN(pending);   /* bucket, base index (< 0: negated) */

/* The running products, the inverses and the slope only feed multiplications: lazy (field.h). */
static void CN(flush_batch)(AFF *ab, const AFF *bases, const CN(pending) *pd, ET *den, ET *pref, int np) {
    ET acc; FF(one)(&acc);
    for (int k = 0; k < np; k++) {
        const AFF *q = &bases[pd[k].i < 0 ? -pd[k].i - 1 : pd[k].i];
        FF(sub)(&den[k], &q->x, &ab[pd[k].b].x);
        pref[k] = acc;
        FF(mul_lz)(&acc, &acc, &den[k]);
    }
    FF(inv)(&acc, &acc);
    for (int k = np; k-- > 0;) {
        ET inv, l, t, x3, qy;
        FF(mul_lz)(&inv, &acc, &pref[k]);   /* 1 / den[k] */
        FF(mul_lz)(&acc, &acc, &den[k]);
        AFF *p = &ab[pd[k].b];
        const AFF *q = &bases[pd[k].i < 0 ? -pd[k].i - 1 : pd[k].i];
        if (pd[k].i < 0) FF(neg)(&qy, &q->y); else qy = q->y;
        FF(sub)(&t, &qy, &p->y);
        FF(mul_lz)(&l, &t, &inv);           /* slope */
        FF(sqr)(&x3, &l);
        FF(sub)(&x3, &x3, &p->x);
        FF(sub)(&x3, &x3, &q->x);
        FF(sub)(&t, &p->x, &x3);
        FF(mul)(&t, &l, &t);
        FF(sub)(&p->y, &t, &p->y);
        p->x = x3;
    }
}

/* One window's buckets while they fill: affine ab[] (occ: holds a point), XYZZ xb[], the
 * batch pd[np] (stamp[b] == cur: bucket b waits in it) and the deferred additions dq[nd]. */
typedef struct {
    const AFF *bases;
    AFF *ab; XZ *xb; unsigned char *occ; uint32_t *stamp;
    CN(pending) *pd, *dq; ET *den, *pref;
    uint32_t cur; int np, nd, batch;
} CN(buckets);

static void CN(add_xyzz_bucket)(CN(buckets) *s, CN(pending) e) {
    const AFF *q = &s->bases[e.i < 0 ? -e.i - 1 : e.i];
    if (e.i < 0) CN(sub_affine)(&s->xb[e.b], &s->xb[e.b], q);
    else CN(add_affine)(&s->xb[e.b], &s->xb[e.b], q);
}

/* Into the batch if the bucket is free in it and the affine formula applies; 0 if it waits. */
static int CN(try_batch)(CN(buckets) *s, CN(pending) e) {
    if (s->stamp[e.b] == s->cur) return 0;
    if (FF(eq)(&s->ab[e.b].x, &s->bases[e.i < 0 ? -e.i - 1 : e.i].x)) { CN(add_xyzz_bucket)(s, e); return 1; }
    s->stamp[e.b] = s->cur;
    s->pd[s->np++] = e;
    return 1;
}

/* Apply the full batch, open the next and move the deferred additions into it. */
static void CN(next_batch)(CN(buckets) *s) {
    while (s->np == s->batch) {
        CN(flush_batch)(s->ab, s->bases, s->pd, s->den, s->pref, s->np);
        s->np = 0; s->cur++;
        int keep = 0;
        for (int k = 0; k < s->nd; k++)
            if (!CN(try_batch)(s, s->dq[k])) s->dq[keep++] = s->dq[k];
        s->nd = keep;
    }
}

static void CN(add_to_bucket)(CN(buckets) *s, CN(pending) e) {
    if (!s->occ[e.b]) {
        const AFF *q = &s->bases[e.i < 0 ? -e.i - 1 : e.i];
        if (e.i < 0) CN(affine_neg)(&s->ab[e.b], q); else s->ab[e.b] = *q;
        s->occ[e.b] = 1;
    } else if (!CN(try_batch)(s, e)) {
        if (s->nd < s->batch) s->dq[s->nd++] = e; else CN(add_xyzz_bucket)(s, e);
    } else if (s->np == s->batch) {
        CN(next_batch)(s);
    }
}

/* The last batches: flush while they are big enough to pay for their inversion, then the
 * stragglers go to XYZZ. */
static void CN(drain_buckets)(CN(buckets) *s) {
    while (s->np >= 32) {
        CN(flush_batch)(s->ab, s->bases, s->pd, s->den, s->pref, s->np);
        s->np = 0; s->cur++;
        int keep = 0;
        for (int k = 0; k < s->nd; k++) {
            if (s->np == s->batch || !CN(try_batch)(s, s->dq[k])) s->dq[keep++] = s->dq[k];
        }
        s->nd = keep;
    }
    for (int k = 0; k < s->np; k++) CN(add_xyzz_bucket)(s, s->pd[k]);
    for (int k = 0; k < s->nd; k++) CN(add_xyzz_bucket)(s, s->dq[k]);
    s->np = s->nd = 0;
}

static XZ CN(window_batch_affine)(const AFF *bases, const int32_t *d, size_t n, size_t half, int batch) {
    CN(buckets) s = {
        .bases = bases,
        .ab = (AFF *)malloc(sizeof(AFF) * half), .xb = (XZ *)malloc(sizeof(XZ) * half),
        .occ = (unsigned char *)calloc(half, 1), .stamp = (uint32_t *)calloc(half, sizeof(uint32_t)),
        .pd = (CN(pending) *)malloc(sizeof(CN(pending)) * batch),
        .dq = (CN(pending) *)malloc(sizeof(CN(pending)) * batch),
        .den = (ET *)malloc(sizeof(ET) * batch), .pref = (ET *)malloc(sizeof(ET) * batch),
        .cur = 1, .np = 0, .nd = 0, .batch = batch,
    };
    for (size_t j = 0; j < half; j++) CN(set_inf)(&s.xb[j]);
    for (size_t i = 0; i < n; i++) {
        if (i + 8 < n) {
            int32_t y = d[i + 8];
            if (y) __builtin_prefetch(&s.ab[(y > 0 ? y : -y) - 1], 1);
            __builtin_prefetch(&bases[i + 8]);
        }
        int32_t x = d[i];
        if (x == 0 || CN(affine_is_inf)(&bases[i])) continue;
        CN(pending) e = { (uint32_t)(x > 0 ? x : -x) - 1, x > 0 ? (int32_t)i : -(int32_t)i - 1 };
        CN(add_to_bucket)(&s, e);
    }
    CN(drain_buckets)(&s);
    /* sum_j (j+1) * bucket_j by running sums from the top bucket down */
    XZ run, acc; CN(set_inf)(&run); CN(set_inf)(&acc);
    for (size_t j = half; j-- > 0;) {
        if (CN(is_inf)(&s.xb[j])) {
            if (s.occ[j]) CN(add_affine)(&run, &run, &s.ab[j]);
        } else {
            if (s.occ[j]) CN(add_affine)(&s.xb[j], &s.xb[j], &s.ab[j]);
            CN(add)(&run, &run, &s.xb[j]);
        }
        CN(add)(&acc, &acc, &run);
    }
    free(s.ab); free(s.xb); free(s.occ); free(s.stamp); free(s.pd); free(s.dq); free(s.den); free(s.pref);
    return acc;
}

/* Pending additions per inversion: an inversion costs about 300 multiplications, so a batch
 * far smaller than that pays more for inversions than it saves. Collisions on a bucket are
 * deferred, not lost, so the batch may reach half the buckets: at 2^12 points that halves the
 * inversions' share against half/4 (the G2 MSM 65 -> 50 ms); at 2^16 it is capped anyway. */
static int CN(msm_batch)(size_t half) {
    size_t b = half / 2;
    return b < 128 ? 0 : (b > 1024 ? 1024 : (int)b);
}

/* The bit length of the largest scalar: 0 when all are zero. */
static int CN(scalar_bits)(const u64 *scalars, size_t n, int threads) {
    u64 o0 = 0, o1 = 0, o2 = 0, o3 = 0;
    #pragma omp parallel for schedule(static) num_threads(threads) reduction(|: o0, o1, o2, o3) if (n >= 4096)
    for (size_t i = 0; i < n; i++) { o0 |= scalars[4 * i]; o1 |= scalars[4 * i + 1]; o2 |= scalars[4 * i + 2]; o3 |= scalars[4 * i + 3]; }
    const u64 o[4] = { o0, o1, o2, o3 };
    for (int l = 3; l >= 0; l--)
        if (o[l]) return 64 * l + 64 - __builtin_clzll(o[l]);
    return 0;
}

/* An MSM in three steps, so that a caller may act between them (groth16.h gives a mapped
 * section's pages back once its plan holds the live points): the digits (plan), each window's bucket sum
 * (independent of the others), and the windows' combination (finish). The windows cover the
 * largest scalar's bits only: GLV's halves take half as many as full scalars. */
typedef struct {
    const AFF *bases; int32_t *digits; XZ *wins;
    size_t n, half, top_half; int c, nwin;
} CN(pip);

static void CN(pip_plan)(CN(pip) *p, const AFF *bases, const u64 *scalars, size_t n, int threads) {
    int bits = CN(scalar_bits)(scalars, n, threads);
    if (bits == 0) bits = 1;
    p->bases = bases; p->n = n;
    p->c = CN(msm_window)(n);
    p->nwin = (bits + p->c) / p->c;   /* ceil((bits + 1) / c): the last window takes the final carry */
    p->half = (size_t)1 << (p->c - 1);
    /* The top window holds the scalars' last bits - (nwin - 1) c (< c) bits, so its digits
     * reach only 2^that: a few buckets, which a batch the size of the others cannot fill
     * without colliding on every addition (at 2^16 that window alone was a tenth of the adds
     * falling back to XYZZ), so it gets its own, smaller bucket table and batch. */
    p->top_half = (size_t)1 << (bits - (p->nwin - 1) * p->c);
    if (p->top_half > p->half) p->top_half = p->half;
    p->digits = (int32_t *)malloc(sizeof(int32_t) * (size_t)p->nwin * (n ? n : 1));
    p->wins = (XZ *)malloc(sizeof(XZ) * p->nwin);
    CN(signed_digits)(p->digits, scalars, n, p->c, p->nwin, threads);
}

static void CN(pip_window)(CN(pip) *p, int w) {
    const int32_t *d = p->digits + (size_t)w * p->n;
    size_t hw = w == p->nwin - 1 ? p->top_half : p->half;
    int batch = CN(msm_batch)(hw);
    p->wins[w] = batch ? CN(window_batch_affine)(p->bases, d, p->n, hw, batch) : CN(window_xyzz)(p->bases, d, p->n, hw);
}

static void CN(pip_finish)(CN(pip) *p, u64 *out) {
    XZ r = p->wins[p->nwin - 1];
    for (int w = p->nwin - 2; w >= 0; w--) {
        for (int k = 0; k < p->c; k++) CN(dbl)(&r, &r);
        CN(add)(&r, &r, &p->wins[w]);
    }
    AFF a; CN(to_affine)(&a, &r);
    memcpy(out, &a, sizeof(AFF));
    free(p->wins); free(p->digits);
}

/* Every group has its endomorphism (each_group.h names its constants): curve_glv.h's split. */
#include "curve_glv.h"
#define GF(x) PS_CAT3(GLV_FP, _, x)
/* phi(x, y) = (beta x, y), beta in Fp: on G2 it scales both coefficients of x. */
static inline void CN(glv_phi)(AFF *r, const AFF *p) {
    static const GF(t) beta = { PS_CAT(GLV_TAG, _BETA) };
    *r = *p;
#ifdef GLV_EXT
    GF(mul)(&r->x.c0, &beta, &p->x.c0); GF(mul)(&r->x.c1, &beta, &p->x.c1);
#else
    GF(mul)(&r->x, &beta, &p->x);
#endif
}
#undef GF

#include "msm_fixed_base.h"

/* sum_i scalars[r_i] * bases[r_i] over the rows r (all n of them when rows is NULL: a key's
 * live rows, so its points at infinity are never copied); out: one affine point. It is
 * msm_fixed_base.h's MSM over a single copy, the bases themselves, so every MSM goes through the
 * endomorphism: sum k_i P_i = sum (k1_i P_i + k2_i phi(P_i)), over 2n points whose scalars
 * are half as long, so half the windows: the same bucket additions, half the bucket
 * reductions and doublings (at 2^16 points a sixth of the G1 time). */
void CN(msm)(u64 *out, const u64 *bases, const u64 *scalars, const int64_t *rows, size_t n, int threads) {
    CN(msm_copies)(out, bases, scalars, rows, n, 0 /* one copy: no stride */, 1, 256, threads);
}

/* out[i] = scalars[i] * base for many scalars (trusted setup): a table of 8-bit-window
 * multiples of base (32 windows x 255 affine points), then 32 mixed adds per scalar and one
 * batched normalisation. */
void CN(fixed_base_batch)(u64 *out_, const u64 *base_, const u64 *scalars, size_t n, int threads) {
    if (threads <= 0) threads = 1;
    const AFF *base = (const AFF *)base_;
    AFF *out = (AFF *)out_;
    const int W = 32, M = 255;
    XZ *tabx = (XZ *)malloc(sizeof(XZ) * W * M);
    AFF *tab = (AFF *)malloc(sizeof(AFF) * W * M);
    XZ bw; CN(from_affine)(&bw, base);
    for (int w = 0; w < W; w++) {
        XZ acc = bw;
        for (int m = 0; m < M; m++) {
            tabx[w * M + m] = acc;
            CN(add)(&acc, &acc, &bw);
        }
        bw = acc; /* 256 * previous window base */
    }
    CN(batch_to_affine_par)(tab, tabx, (size_t)W * M, threads);
    free(tabx);
    XZ *res = (XZ *)malloc(sizeof(XZ) * (n ? n : 1));
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 64)
    for (size_t i = 0; i < n; i++) {
        XZ acc; CN(set_inf)(&acc);
        const unsigned char *k = (const unsigned char *)(scalars + 4 * i);   /* little-endian host */
        for (int w = 0; w < W; w++)
            if (k[w]) CN(add_affine)(&acc, &acc, &tab[w * M + k[w] - 1]);
        res[i] = acc;
    }
    CN(batch_to_affine_par)(out, res, n, threads);
    free(res); free(tab);
}

void CN(add_affine_api)(u64 *out, const u64 *p, const u64 *q) {
    XZ a; CN(from_affine)(&a, (const AFF *)p);
    CN(add_affine)(&a, &a, (const AFF *)q);
    CN(to_affine)((AFF *)out, &a);
}
void CN(dbl_affine_api)(u64 *out, const u64 *p) {
    XZ a; CN(from_affine)(&a, (const AFF *)p);
    CN(dbl)(&a, &a);
    CN(to_affine)((AFF *)out, &a);
}
/* p + q through the general XYZZ formula (not the mixed one): both operands are first
 * rescaled by lambda = 3 (X*l^2, Y*l^3, ZZ = l^2, ZZZ = l^3), the same point in other
 * coordinates, so tests exercise the full add including its doubling/inverse branches. */
static void CN(rescale)(XZ *a) {
    if (CN(is_inf)(a)) return;
    ET l, l2, l3; FF(one)(&l); FF(dbl)(&l2, &l); FF(add)(&l, &l2, &l);
    FF(sqr)(&l2, &l); FF(mul)(&l3, &l2, &l);
    FF(mul)(&a->X, &a->X, &l2); FF(mul)(&a->Y, &a->Y, &l3);
    FF(mul)(&a->ZZ, &a->ZZ, &l2); FF(mul)(&a->ZZZ, &a->ZZZ, &l3);
}
void CN(add_xyzz_api)(u64 *out, const u64 *p, const u64 *q) {
    XZ a, b; CN(from_affine)(&a, (const AFF *)p); CN(from_affine)(&b, (const AFF *)q);
    CN(rescale)(&a);
    CN(add)(&a, &a, &b);
    CN(to_affine)((AFF *)out, &a);
}
void CN(scalar_mul_api)(u64 *out, const u64 *p, const u64 *k) {
    XZ a; CN(scalar_mul)(&a, (const AFF *)p, k);
    CN(to_affine)((AFF *)out, &a);
}
