/* Groth16 of one curve in whole steps (host only), instantiated by pairing_instances.h after
 * pairing.h (PC, G1C, G2C, PC_LABEL):
 *   groth16_assemble   the randomised proof from its five MSMs (engine.prover.groth16 and below)
 *   groth16_prove_zkey a whole proof from a snarkjs zkey's sections and a witness: what the
 *                      command-line prover runs, so a proof from files needs no array library
 *   groth16_check_key, groth16_verify   the verifier (engine.prover.verify and the command line)
 * Scalars: 4 standard-form limbs. Points: affine Montgomery limbs, all-zero for infinity (the
 * zkey layout). Errors come back as a message in err (at most errlen bytes). */
#include <stdio.h>

#define GN(x) PS_CAT3(PC, _, x)
#define R_(x) PS_CAT3(PC, _fr_, x)
#define RT R_(t)
#define P1(x) PS_CAT3(G1C, _, x)
#define P2(x) PS_CAT3(G2C, _, x)
#define B1(x) PS_CAT3(F1, _, x)
#define A1 P1(affine)
#define A2 P2(affine)
#define X1 P1(xyzz)
#define X2 P2(xyzz)

/* acc += k p */
static void GN(g1_add_mul)(X1 *acc, const A1 *p, const u64 *k) { X1 t; P1(scalar_mul)(&t, p, k); P1(add)(acc, acc, &t); }
static void GN(g2_add_mul)(X2 *acc, const A2 *p, const u64 *k) { X2 t; P2(scalar_mul)(&t, p, k); P2(add)(acc, acc, &t); }

/* The randomised proof from its MSMs (A, B1, B2, and C + H), r and s (SNARKJS.md):
 *   pi_a = A + alpha1 + r delta1        pi_b = B2 + beta2 + s delta2
 *   pi_c = (C + H) + s pi_a + r b1 - r s delta1,  b1 = B1 + beta1 + s delta1 */
void GN(groth16_assemble)(u64 *pi_a, u64 *pi_b, u64 *pi_c, const u64 *msm_a, const u64 *msm_b1,
                          const u64 *msm_b2, const u64 *msm_ch, const u64 *alpha1, const u64 *beta1,
                          const u64 *beta2, const u64 *delta1, const u64 *delta2, const u64 *r, const u64 *s) {
    const A1 *d1 = (const A1 *)delta1;
    X1 a, b1, c; X2 b;
    P1(from_affine)(&a, (const A1 *)msm_a); P1(add_affine)(&a, &a, (const A1 *)alpha1); GN(g1_add_mul)(&a, d1, r);
    P2(from_affine)(&b, (const A2 *)msm_b2); P2(add_affine)(&b, &b, (const A2 *)beta2);
    GN(g2_add_mul)(&b, (const A2 *)delta2, s);
    P1(from_affine)(&b1, (const A1 *)msm_b1); P1(add_affine)(&b1, &b1, (const A1 *)beta1); GN(g1_add_mul)(&b1, d1, s);
    A1 pa, pb1;
    P1(to_affine)(&pa, &a); P1(to_affine)(&pb1, &b1);
    /* -r s in Fr, back to a standard-form scalar */
    RT rm, sm, nrs;
    memcpy(&rm, r, sizeof rm); memcpy(&sm, s, sizeof sm);
    R_(to_mont)(&rm, &rm); R_(to_mont)(&sm, &sm);
    R_(mul)(&nrs, &rm, &sm); R_(neg)(&nrs, &nrs); R_(from_mont)(&nrs, &nrs);
    P1(from_affine)(&c, (const A1 *)msm_ch);
    GN(g1_add_mul)(&c, &pa, s); GN(g1_add_mul)(&c, &pb1, r); GN(g1_add_mul)(&c, d1, nrs.v);
    memcpy(pi_a, &pa, sizeof pa);
    P2(to_affine)((A2 *)pi_b, &b);
    P1(to_affine)((A1 *)pi_c, &c);
}

/* A zkey's section 4 entry: u32 matrix (0 = A, 1 = B), u32 constraint, u32 signal, then the
 * coefficient as c R^2 mod r. Entries are 44 bytes apart, so they are read by memcpy. */
#ifndef PS_G16_ENTRY
#define PS_G16_ENTRY 44
#endif

/* ab[m] = M w over the domain rows for M = A, B, in Montgomery form: the Montgomery product of
 * a stored c R^2 with a standard-form w[s] is c w[s] R. One thread per matrix. Returns the
 * first bad entry's index, or -1. */
static int64_t GN(g16_evaluate)(RT *ab[2], const unsigned char *entries, size_t n_coef, const RT *w,
                                size_t n_vars, size_t domain, int threads) {
    int64_t bad[2] = { -1, -1 };
    #pragma omp parallel for schedule(static, 1) num_threads(threads < 2 ? threads : 2)
    for (int m = 0; m < 2; m++) {
        RT *out = ab[m];
        for (size_t i = 0; i < n_coef; i++) {
            const unsigned char *e = entries + (size_t)PS_G16_ENTRY * i;
            uint32_t head[3];
            memcpy(head, e, sizeof head);
            if (head[0] != (uint32_t)m) {
                if (head[0] > 1) { bad[m] = (int64_t)i; break; }
                continue;
            }
            RT v, t;
            memcpy(&v, e + sizeof head, sizeof v);
            if (head[1] >= domain || head[2] >= n_vars || !R_(is_reduced)(&v)) { bad[m] = (int64_t)i; break; }
            R_(mul)(&t, &v, &w[head[2]]);
            R_(add)(&out[head[1]], &out[head[1]], &t);
        }
    }
    if (bad[0] < 0) return bad[1];
    return bad[1] < 0 || bad[0] < bad[1] ? bad[0] : bad[1];
}

/* The witness is the file's: every value a canonical element, and w[0] = 1. */
static int GN(g16_check_witness)(const RT *w, size_t n_vars, char *err, size_t errlen) {
    for (size_t i = 0; i < n_vars; i++)
        if (!R_(is_reduced)(&w[i])) {
            snprintf(err, errlen, "value %zu is not reduced below the field prime", i);
            return 0;
        }
    RT one; R_(zero)(&one); one.v[0] = 1;
    if (!n_vars || !R_(eq)(&w[0], &one)) { snprintf(err, errlen, "witness[0] must be 1"); return 0; }
    return 1;
}

/* H's scalars from a = A w and b = B w (Montgomery; both clobbered): c = a b on every row (the
 * public-input rows have b = 0, as snarkjs leaves them), then a b - c on the coset, in
 * standard form as the H MSM takes it. */
static void GN(g16_h)(RT *h, RT *a, RT *b, int log_domain, int threads) {
    size_t n = (size_t)1 << log_domain;
    RT *c = (RT *)malloc(n * sizeof(RT));
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) R_(mul)(&c[i], &a[i], &b[i]);
    RT dw, dwi, dni, dsh;
    R_(domain_roots)(&dw, &dwi, &dni, &dsh, log_domain);
    R_(h_coset_mont)(h, a, b, c, n, &dw, &dwi, &dni, &dsh, threads);
    R_(from_mont_vec)(h, n, threads);
    free(c);
}

/* Plan an MSM of the proof over its bases' live rows (a signal absent from A or B has the point
 * at infinity there: half of them in many circuits, and the G2 MSM is the dearest): the GLV
 * split and its digits. The plan holds its own copy of the live points (with their
 * endomorphism images), so the bases are not read again. */
#define PS_G16_PLAN(G, job, bases, scalars, n)                                                     \
    do {                                                                                           \
        size_t live_ = 0;                                                                          \
        int64_t *rows_ = (int64_t *)malloc(sizeof(int64_t) * ((n) ? (n) : 1));                    \
        for (size_t i_ = 0; i_ < (n); i_++)                                                        \
            if (!G(affine_is_inf)((const G(affine) *)(bases) + i_)) rows_[live_++] = (int64_t)i_;  \
        G(job_plan)(&(job), (bases), (scalars), rows_, live_, 0, 1, 256, 1);                       \
        free(rows_);                                                                               \
    } while (0)

/* Window tasks queued per MSM before its plan says how many windows it has: a task runs
 * windows t, t + PS_G16_WINDOWS, ... so none is lost however many there are, and the tasks
 * past the last window return at once (GLV halves of ~128 bits in windows of at least 3 bits
 * make at most 44). */
#define PS_G16_WINDOWS 48
#define PS_G16_RUN(G, job, t)                                                                      \
    for (int w_ = (t); w_ < (job).pip.nwin; w_ += PS_G16_WINDOWS) G(pip_window)(&(job).pip, w_)

#ifndef PS_G16_RELEASE_ONCE
#define PS_G16_RELEASE_ONCE
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif
/* Gives the whole pages inside [p, p + n) back to the file they map (mapped: the caller's
 * buffer is a read-only file mapping), so they stop counting in the process's resident set;
 * read again, they come back from the page cache. A buffer that is not a mapping is left as
 * it is: dropping an anonymous page would zero it. */
static void ps_g16_release(const void *p, size_t n, int mapped) {
#ifdef __linux__
    long page = sysconf(_SC_PAGESIZE);
    if (!mapped || page <= 0) return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)p; (void)n; (void)mapped;
#endif
}
#endif

/* A whole proof (pi_a | pi_b | pi_c into proof, Montgomery) from a zkey whose layout the caller
 * has checked against its header: hdr is section 2's points (alpha1 beta1 beta2 gamma2 delta1
 * delta2), entries section 4 after its count, and the point sections 5 to 9. rs: r then s.
 * mapped: entries and the point sections lie in a read-only mapping of the zkey, given back a
 * section at a time as each is done with (the coefficients once A w and B w are summed, a
 * section of points once its MSM's plan has copied the live ones).
 *
 * The MSMs share the thread team as a graph of tasks: each one's plan, its window tasks, its
 * finish (which frees the plan). What the proof holds at its peak is the plans alive at once
 * (each a GLV copy of its live points and their digits, twice its section), so a plan waits
 * for the finish of the MSM `live` places before it: the G2 MSM (the largest) first, then H
 * (so the domain's arrays go early), A, B1, C. Two alive keep two threads busy (one plans
 * while the other sums windows); more threads get one more. On a few cores H's transforms
 * run as one task among them, on many they run first with every thread. Returns 0; 1 with err
 * for a bad zkey entry, 2 for a bad witness, 3 when the domain's own arrays cannot be
 * allocated. */
int GN(groth16_prove_zkey)(u64 *proof, const u64 *witness, size_t n_vars, size_t n_public, int log_domain,
                           const unsigned char *entries, size_t n_coef, const u64 *hdr, const u64 *a_pts,
                           const u64 *b1_pts, const u64 *b2_pts, const u64 *c_pts, const u64 *h_pts,
                           const u64 *rs, int threads, int mapped, char *err, size_t errlen) {
    if (threads <= 0) threads = 1;
    const RT *w = (const RT *)witness;
    if (!GN(g16_check_witness)(w, n_vars, err, errlen)) return 2;
    size_t n = (size_t)1 << log_domain;
    RT *a = (RT *)calloc(n, sizeof(RT)), *b = (RT *)calloc(n, sizeof(RT)), *h = (RT *)malloc(n * sizeof(RT));
    if (!a || !b || !h) {
        free(a); free(b); free(h);
        snprintf(err, errlen, "out of memory for a domain of %zu rows", n);
        return 3;
    }
    RT *ab[2] = { a, b };
    int64_t bad = GN(g16_evaluate)(ab, entries, n_coef, w, n_vars, n, threads);
    ps_g16_release(entries, (size_t)PS_G16_ENTRY * n_coef, mapped);
    if (bad >= 0) {
        free(a); free(b); free(h);
        snprintf(err, errlen, "coefficient entry %lld is out of range or not reduced", (long long)bad);
        return 1;
    }
    int h_first = threads > 4;
    if (h_first) {
        GN(g16_h)(h, a, b, log_domain, threads);
        free(a); free(b);
    }
    const size_t L1 = sizeof(A1) / sizeof(u64), L2 = sizeof(A2) / sizeof(u64);
    size_t priv = n_vars - n_public - 1;
    /* the G1 MSMs in their order: H, A, B1, C (the G2 MSM is place 0) */
    const u64 *g1_bases[4] = { h_pts, a_pts, b1_pts, c_pts };
    const u64 *g1_scalars[4] = { (const u64 *)h, witness, witness, witness + 4 * (n_public + 1) };
    const size_t g1_rows[4] = { n, n_vars, n_vars, priv };
    u64 g1_out[4][sizeof(A1) / sizeof(u64)], mb2[sizeof(A2) / sizeof(u64)];
    P2(msm_job) jb2;
    P1(msm_job) j1[4];
    char dep[5];  /* per MSM: its plan writes it, its windows read it, its finish writes it */
    char first[4];  /* what a plan with nothing to wait for waits for */
    int live = threads > 4 ? 3 : 2;
    #pragma omp parallel num_threads(threads)
    #pragma omp single
    {
        #pragma omp task depend(out: dep[0])
        {
            PS_G16_PLAN(P2, jb2, b2_pts, witness, n_vars);
            ps_g16_release(b2_pts, L2 * 8 * n_vars, mapped);
        }
        for (int t = 0; t < PS_G16_WINDOWS; t++) {
            #pragma omp task depend(in: dep[0])
            PS_G16_RUN(P2, jb2, t);
        }
        #pragma omp task depend(inout: dep[0])
        P2(job_finish)(&jb2, mb2);
        for (int k = 0; k < 4; k++) {
            char *after = k + 1 >= live ? &dep[k + 1 - live] : &first[k];  /* the finish this plan waits for */
            #pragma omp task depend(out: dep[k + 1]) depend(in: after[0])
            {
                if (k == 0 && !h_first) {
                    GN(g16_h)(h, a, b, log_domain, 1);
                    free(a); free(b);
                }
                PS_G16_PLAN(P1, j1[k], g1_bases[k], g1_scalars[k], g1_rows[k]);
                ps_g16_release(g1_bases[k], L1 * 8 * g1_rows[k], mapped);
                if (k == 0) free(h);
            }
            for (int t = 0; t < PS_G16_WINDOWS; t++) {
                #pragma omp task depend(in: dep[k + 1])
                PS_G16_RUN(P1, j1[k], t);
            }
            #pragma omp task depend(inout: dep[k + 1])
            P1(job_finish)(&j1[k], g1_out[k]);
        }
    }
    /* C + H */
    X1 ch; P1(from_affine)(&ch, (const A1 *)g1_out[3]); P1(add_affine)(&ch, &ch, (const A1 *)g1_out[0]);
    P1(to_affine)((A1 *)g1_out[3], &ch);
    /* hdr: alpha1 (G1), beta1 (G1), beta2 (G2), gamma2 (G2), delta1 (G1), delta2 (G2) */
    const u64 *alpha1 = hdr, *beta1 = hdr + L1, *beta2 = hdr + 2 * L1, *delta1 = hdr + 2 * L1 + 2 * L2;
    const u64 *delta2 = delta1 + L1;
    GN(groth16_assemble)(proof, proof + L1, proof + L1 + L2, g1_out[1], g1_out[2], mb2, g1_out[3], alpha1, beta1,
                         beta2, delta1, delta2, rs, rs + 4);
    return 0;
}

/* 0 when pt (of G1, or of G2 when g2) is infinity or a point of the order-r subgroup; else 1
 * with the reason in err. */
static int GN(g16_bad_point)(const u64 *pt, int g2, const char *what, char *err, size_t errlen) {
    const B1(t) *coords = (const B1(t) *)pt;
    for (int i = 0; i < (g2 ? 4 : 2); i++)
        if (!B1(is_reduced)(&coords[i])) {
            snprintf(err, errlen, "%s: coordinate not reduced modulo the base field", what);
            return 1;
        }
    int code = g2 ? GN(g2_check)(pt) : GN(g1_check)(pt);
    if (code) snprintf(err, errlen, "%s: not %s the %s %s %s", what, code == 1 ? "on" : "in", PC_LABEL,
                       g2 ? "G2" : "G1", code == 1 ? "curve" : "subgroup");
    return code != 0;
}

/* 0 when every point of the verifying key is a point of its group; 1 with the reason in err. */
int GN(groth16_check_key)(const u64 *alpha1, const u64 *beta2, const u64 *gamma2, const u64 *delta2,
                          const u64 *ic, size_t n_ic, char *err, size_t errlen) {
    const size_t L1 = sizeof(A1) / sizeof(u64);
    if (GN(g16_bad_point)(alpha1, 0, "vk alpha1", err, errlen) || GN(g16_bad_point)(beta2, 1, "vk beta2", err, errlen)
        || GN(g16_bad_point)(gamma2, 1, "vk gamma2", err, errlen)
        || GN(g16_bad_point)(delta2, 1, "vk delta2", err, errlen))
        return 1;
    for (size_t i = 0; i < n_ic; i++) {
        char what[48];
        snprintf(what, sizeof what, "verification key IC[%zu]", i);
        if (GN(g16_bad_point)(ic + i * L1, 0, what, err, errlen)) return 1;
    }
    return 0;
}

/* Whether e(pi_a, pi_b) = e(alpha1, beta2) e(L, gamma2) e(pi_c, delta2), L = IC_0 + sum x_i IC_i,
 * written as one multi-pairing e(-pi_a, pi_b) e(L, gamma2) e(pi_c, delta2) alpha_beta = 1 with
 * alpha_beta e(alpha1, beta2)'s Miller loop (miller_loop_api; a verifier keeps it per key).
 * The key is checked apart (groth16_check_key), the proof's points here; public: n_public
 * standard-form values, each < r. Returns 0 valid, 1 not valid, 2 with err for a bad point. */
int GN(groth16_verify)(const u64 *proof, const u64 *gamma2, const u64 *delta2, const u64 *ic, const u64 *pub,
                       size_t n_public, const u64 *alpha_beta, char *err, size_t errlen) {
    const size_t L1 = sizeof(A1) / sizeof(u64), L2 = sizeof(A2) / sizeof(u64);
    const u64 *pi_a = proof, *pi_b = proof + L1, *pi_c = proof + L1 + L2;
    if (GN(g16_bad_point)(pi_a, 0, "pi_a", err, errlen) || GN(g16_bad_point)(pi_b, 1, "pi_b", err, errlen)
        || GN(g16_bad_point)(pi_c, 0, "pi_c", err, errlen))
        return 2;
    for (size_t i = 0; i < n_public; i++)
        if (!R_(is_reduced)((const RT *)(pub + 4 * i))) {
            snprintf(err, errlen, "public input %zu is not a field element (must be 0 <= x < r)", i);
            return 2;
        }
    A1 g1[3];
    A2 g2[3];
    /* L through the MSM on one thread: for a handful of points a thread team costs more than
     * it saves, and on a busy host waking one can take milliseconds */
    X1 l; P1(from_affine)(&l, (const A1 *)ic);
    if (n_public) {
        A1 s; P1(msm)((u64 *)&s, ic + L1, pub, NULL, n_public, 1);
        P1(add_affine)(&l, &l, &s);
    }
    P1(affine_neg)(&g1[0], (const A1 *)pi_a);
    memcpy(&g2[0], pi_b, sizeof(A2));
    P1(to_affine)(&g1[1], &l);
    memcpy(&g2[1], gamma2, sizeof(A2));
    memcpy(&g1[2], pi_c, sizeof(A1));
    memcpy(&g2[2], delta2, sizeof(A2));
    return GN(pairing_check)((const u64 *)g1, (const u64 *)g2, 3, alpha_beta) ? 0 : 1;
}

#undef PS_G16_PLAN
#undef PS_G16_RUN
#undef PS_G16_WINDOWS
#undef GN
#undef R_
#undef RT
#undef P1
#undef P2
#undef B1
#undef A1
#undef A2
#undef X1
#undef X2
