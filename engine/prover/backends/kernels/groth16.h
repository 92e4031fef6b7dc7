/* Groth16 of one curve in whole steps (host only), instantiated by pairing_instances.h after
 * pairing.h (PC, G1C, G2C, PC_LABEL):
 *   groth16_assemble   the randomised proof from its five MSMs (engine.prover.groth16 and below)
 *   groth16_check_witness, groth16_evaluate, groth16_msm_pool (H among the MSMs)
 *                      a proof's steps over a snarkjs zkey's sections (mapped) and a witness, for
 *                      the CPU backend's launch over a mapped key (engine.prover.backends.cpu), so
 *                      a proof from files needs no array library; groth16_alloc/free hold the
 *                      domain's vectors outside Python's allocator
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

/* The randomised proof from its MSMs (A, B1, B2, and C + H), r and s (docs/formats.md):
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

/* words zeroed u64s from the C heap (NULL when it has none): the domain's vectors of a proof
 * from a mapped key, which the caller frees with groth16_free. */
uint64_t *GN(groth16_alloc)(size_t words) { return (uint64_t *)calloc(words ? words : 1, sizeof(u64)); }
void GN(groth16_free)(uint64_t *p) { free(p); }

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

/* 0 when the witness is the file's: every value a canonical element, and w[0] = 1; else 2
 * (a bad witness, as the command reports it) with the reason in err. */
int GN(groth16_check_witness)(const u64 *witness, size_t n_vars, char *err, size_t errlen) {
    const RT *w = (const RT *)witness;
    for (size_t i = 0; i < n_vars; i++)
        if (!R_(is_reduced)(&w[i])) {
            snprintf(err, errlen, "value %zu is not reduced below the field prime", i);
            return 2;
        }
    RT one; R_(zero)(&one); one.v[0] = 1;
    if (!n_vars || !R_(eq)(&w[0], &one)) { snprintf(err, errlen, "witness[0] must be 1"); return 2; }
    return 0;
}

/* a = A w, b = B w from the key's coefficient entries (section 4 after its count) and c = a b,
 * over the domain's rows (the public-input rows have b = 0, as snarkjs leaves them), standard
 * form as H's step takes them; a, b, c zeroed by the caller. The entries are given back once
 * summed (mapped). Returns the first bad entry's index, or -1. */
int64_t GN(groth16_evaluate)(u64 *a, u64 *b, u64 *c, const unsigned char *entries, size_t n_coef,
                             const u64 *witness, size_t n_vars, size_t domain, int threads, int mapped) {
    if (threads <= 0) threads = 1;
    RT *ab[2] = { (RT *)a, (RT *)b }, *cc = (RT *)c;
    int64_t bad = GN(g16_evaluate)(ab, entries, n_coef, (const RT *)witness, n_vars, domain, threads);
    ps_g16_release(entries, (size_t)PS_G16_ENTRY * n_coef, mapped);
    if (bad >= 0) return bad;
    #pragma omp parallel for schedule(static) num_threads(threads) if (domain >= 4096)
    for (size_t i = 0; i < domain; i++) {
        R_(mul)(&cc[i], &ab[0][i], &ab[1][i]);
        R_(from_mont)(&ab[0][i], &ab[0][i]); R_(from_mont)(&ab[1][i], &ab[1][i]); R_(from_mont)(&cc[i], &cc[i]);
    }
    return -1;
}

/* h = a b - c on snarkjs's coset from their evaluations over the domain of 2^log_domain
 * points (standard form in and out; a, b, c clobbered): what the H MSM takes. */
static void GN(g16_h_coset)(u64 *h, u64 *a, u64 *b, u64 *c, int log_domain, int threads) {
    size_t n = (size_t)1 << log_domain;
    if (threads <= 0) threads = 1;
    RT *av = (RT *)a, *bv = (RT *)b, *cv = (RT *)c;
    R_(to_mont_vec)(av, n, threads); R_(to_mont_vec)(bv, n, threads); R_(to_mont_vec)(cv, n, threads);
    RT dw, dwi, dni, dsh;
    R_(domain_roots)(&dw, &dwi, &dni, &dsh, log_domain);
    R_(h_coset_mont)((RT *)h, av, bv, cv, n, &dw, &dwi, &dni, &dsh, threads);
    R_(from_mont_vec)((RT *)h, n, threads);
}

/* Plan an MSM over its bases' live rows (a signal absent from A or B has the point at
 * infinity there: half of them in many circuits, and the G2 MSM is the dearest): the GLV split
 * and its digits, on one thread. The plan holds its own copy of the live points (with their
 * endomorphism images), so the bases are given back once it is made (mapped). */
#define PS_G16_PLAN(G, NAME)                                                                       \
    static void NAME(G(msm_job) *job, const u64 *bases, const u64 *scalars, size_t n, int mapped) { \
        size_t live = 0;                                                                           \
        int64_t *rows = (int64_t *)malloc(sizeof(int64_t) * (n ? n : 1));                          \
        for (size_t i = 0; i < n; i++)                                                             \
            if (!G(affine_is_inf)((const G(affine) *)bases + i)) rows[live++] = (int64_t)i;         \
        G(job_plan)(job, bases, scalars, rows, live, 0, 1, 256, 1);                                \
        free(rows);                                                                                \
        ps_g16_release(bases, sizeof(G(affine)) * n, mapped);                                      \
    }
PS_G16_PLAN(P1, GN(g16_plan_g1))
PS_G16_PLAN(P2, GN(g16_plan_g2))
#undef PS_G16_PLAN

/* H, and a, b, c freed (free_abc: they are groth16_alloc's, handed over) as soon as it is made. */
static void GN(g16_h_made)(u64 *h, u64 *a, u64 *b, u64 *c, int log_domain, int threads, int free_abc) {
    GN(g16_h_coset)(h, a, b, c, log_domain, threads);
    if (free_abc) { free(a); free(b); free(c); }
}

/* Window tasks queued per MSM before its plan says how many windows it has: a task runs
 * windows t, t + PS_G16_WINDOWS, ... so none is lost however many there are, and the tasks
 * past the last window return at once (GLV halves of ~128 bits in windows of at least 3 bits
 * make at most 44). */
#define PS_G16_WINDOWS 48

/* k MSMs on one thread team: job i sums scalars[i][r] bases[i][r] over rows[i] bases (of G2
 * when g2[i], else G1) into outs[i], one affine point. With a given (not NULL), H is made
 * too (g16_h_coset of a, b, c into h), before the plans of the jobs whose scalars are h,
 * and a, b, c are freed then when free_abc (the caller hands them over).
 * The jobs are independent and in no order of the proof's: the caller queues them (a
 * launch), this runs them (its finish).
 *
 * They share the team as a graph of tasks: each one's plan, its window tasks, its finish
 * (which frees the plan), so one job's plan and another's windows fill each other's idle
 * threads. What the pool holds at its peak is the plans alive at once (each a GLV copy of its
 * live points and their digits, twice its section), so a plan waits for the finish of the job
 * `live` places before it: the caller puts the largest first. Two alive keep two threads busy
 * (one plans while the other sums windows); more than four threads get one more. On a few
 * cores H runs as one task among them, on many it runs first with every thread. */
void GN(groth16_msm_pool)(uint64_t **outs, const uint64_t **bases, const uint64_t **scalars, const size_t *rows,
                          const int *g2, size_t k, uint64_t *h, uint64_t *a, uint64_t *b, uint64_t *c,
                          int log_domain, int threads, int mapped, int free_abc) {
    if (threads <= 0) threads = 1;
    if (k == 0) return;
    P1(msm_job) *j1 = (P1(msm_job) *)malloc(sizeof(P1(msm_job)) * k);
    P2(msm_job) *j2 = (P2(msm_job) *)malloc(sizeof(P2(msm_job)) * k);
    char *dep = (char *)malloc(2 * k);  /* per job: its plan writes it, its windows read it, its finish writes it */
    char *first = dep + k;  /* what a plan with nothing to wait for waits for */
    char h_done;
    int with_h = a != NULL, h_first = with_h && threads > 4;
    if (h_first) GN(g16_h_made)(h, a, b, c, log_domain, threads, free_abc);
    size_t live = threads > 4 ? 3 : 2;
    #pragma omp parallel num_threads(threads)
    #pragma omp single
    {
        if (with_h && !h_first) {
            #pragma omp task depend(out: h_done)
            GN(g16_h_made)(h, a, b, c, log_domain, 1, free_abc);
        }
        for (size_t i = 0; i < k; i++) {
            char *after = i >= live ? &dep[i - live] : &first[i];  /* the finish this plan waits for */
            char *needs = with_h && scalars[i] == h ? &h_done : &first[i];
            #pragma omp task depend(out: dep[i]) depend(in: after[0]) depend(in: needs[0])
            {
                if (g2[i]) GN(g16_plan_g2)(&j2[i], bases[i], scalars[i], rows[i], mapped);
                else GN(g16_plan_g1)(&j1[i], bases[i], scalars[i], rows[i], mapped);
            }
            for (int t = 0; t < PS_G16_WINDOWS; t++) {
                #pragma omp task depend(in: dep[i])
                {
                    if (g2[i]) for (int w = t; w < j2[i].pip.nwin; w += PS_G16_WINDOWS) P2(pip_window)(&j2[i].pip, w);
                    else for (int w = t; w < j1[i].pip.nwin; w += PS_G16_WINDOWS) P1(pip_window)(&j1[i].pip, w);
                }
            }
            #pragma omp task depend(inout: dep[i])
            {
                if (g2[i]) P2(job_finish)(&j2[i], outs[i]);
                else P1(job_finish)(&j1[i], outs[i]);
            }
        }
    }
    free(j1); free(j2); free(dep);
}
#undef PS_G16_WINDOWS

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
