/* The CPU build's C ABI: one line per entry point, for each curve C (bn128, bls12381).
 *   PS_API(ret, name, (params))        C_name
 *   PS_FIELD_API(ret, name, (params))  C_fr_name and C_fp_name
 *   PS_GROUP_API(ret, name, (params))  C_g1_name and C_g2_name
 * engine.prover.backends.cpu.native_build reads these lines for cffi's cdef, and host.c includes this file
 * after its definitions, so the compiler holds every definition to its line: there is no
 * second copy of a signature to drift. One line each: the reader is a line parser. */

PS_FIELD_API(void, vec_op, (uint64_t *out, const uint64_t *a, const uint64_t *b, size_t n, int op, int threads))
PS_API(void, fp2_vec_op, (uint64_t *out, const uint64_t *a, const uint64_t *b, size_t n, int op, int threads))

PS_API(void, fr_ntt, (uint64_t *a, size_t n, const uint64_t *w, const uint64_t *scale, int threads))
PS_API(void, fr_coset_scale, (uint64_t *a, size_t n, const uint64_t *g, int threads))
PS_API(void, fr_h_coset, (uint64_t *out, uint64_t *a, uint64_t *b, uint64_t *c, size_t n, const uint64_t *w, const uint64_t *winv, const uint64_t *ninv, const uint64_t *shift, int threads))
PS_API(void, fr_poseidon3_batch, (uint64_t *states, size_t n, const uint64_t *rc, const uint64_t *mds, int r_f, int r_p, int threads))
PS_API(int64_t, fr_witness_run, (uint64_t *w, uint64_t *a, uint64_t *b, uint64_t *c, const uint64_t *inputs, const int64_t *ops, size_t n_ops, const unsigned char *solves, const int64_t *b_src, const uint64_t *coefficients, size_t n_coefficients, const int64_t *a_ptr, const int64_t *a_cols, const uint32_t *a_coef, const int64_t *b_ptr, const int64_t *b_cols, const uint32_t *b_coef, const int64_t *c_ptr, const int64_t *c_cols, const uint32_t *c_coef, size_t rows, int check))
PS_API(void, fr_sparse_matvec, (uint64_t *out, const int64_t *row_ptr, const int64_t *cols, const uint64_t *coeffs, const uint64_t *w, size_t rows, int threads))

PS_GROUP_API(int, msm_window, (size_t n))
PS_GROUP_API(void, msm, (uint64_t *out, const uint64_t *bases, const uint64_t *scalars, const int64_t *rows, size_t n, int threads))
PS_GROUP_API(void, shifted_copies, (uint64_t *out, const uint64_t *bases, size_t n, int copies, int shift, int threads))
PS_GROUP_API(void, msm_copies, (uint64_t *out, const uint64_t *table, const uint64_t *scalars, const int64_t *rows, size_t n, size_t stride, int copies, int shift, int threads))
PS_GROUP_API(void, msm_copies_batch, (uint64_t *out, const uint64_t *table, const uint64_t *scalars, size_t vlen, size_t k, const int64_t *rows, size_t n, size_t stride, int copies, int shift, int threads))
PS_GROUP_API(void, fixed_base_batch, (uint64_t *out, const uint64_t *base, const uint64_t *scalars, size_t n, int threads))
PS_GROUP_API(void, add_affine_api, (uint64_t *out, const uint64_t *p, const uint64_t *q))
PS_GROUP_API(void, add_xyzz_api, (uint64_t *out, const uint64_t *p, const uint64_t *q))
PS_GROUP_API(void, dbl_affine_api, (uint64_t *out, const uint64_t *p))
PS_GROUP_API(void, scalar_mul_api, (uint64_t *out, const uint64_t *p, const uint64_t *k))

/* kernels/pairing.h, wrapped by engine.prover.pairing */
PS_API(int, g1_check, (const uint64_t *pt))
PS_API(int, g2_check, (const uint64_t *pt))
PS_API(int, pairing_check, (const uint64_t *g1, const uint64_t *g2, size_t n, const uint64_t *factor))
PS_API(void, miller_loop_api, (uint64_t *out, const uint64_t *g1, const uint64_t *g2, size_t n))
PS_API(void, pairing, (uint64_t *out, const uint64_t *g1, const uint64_t *g2))
PS_API(void, pairing_power, (uint64_t *out, const uint64_t *g1, const uint64_t *g2))

/* kernels/groth16.h */
PS_API(void, groth16_assemble, (uint64_t *pi_a, uint64_t *pi_b, uint64_t *pi_c, const uint64_t *msm_a, const uint64_t *msm_b1, const uint64_t *msm_b2, const uint64_t *msm_ch, const uint64_t *alpha1, const uint64_t *beta1, const uint64_t *beta2, const uint64_t *delta1, const uint64_t *delta2, const uint64_t *r, const uint64_t *s))
PS_API(uint64_t *, groth16_alloc, (size_t words))
PS_API(void, groth16_free, (uint64_t *p))
PS_API(int, groth16_check_witness, (const uint64_t *witness, size_t n_vars, char *err, size_t errlen))
PS_API(int64_t, groth16_evaluate, (uint64_t *a, uint64_t *b, uint64_t *c, const unsigned char *entries, size_t n_coef, const uint64_t *witness, size_t n_vars, size_t domain, int threads, int mapped))
PS_API(void, groth16_msm_pool, (uint64_t **outs, const uint64_t **bases, const uint64_t **scalars, const size_t *rows, const int *g2, size_t k, uint64_t *h, uint64_t *a, uint64_t *b, uint64_t *c, int log_domain, int threads, int mapped, int free_abc))
PS_API(int, groth16_check_key, (const uint64_t *alpha1, const uint64_t *beta2, const uint64_t *gamma2, const uint64_t *delta2, const uint64_t *ic, size_t n_ic, char *err, size_t errlen))
PS_API(int, groth16_verify, (const uint64_t *proof, const uint64_t *gamma2, const uint64_t *delta2, const uint64_t *ic, const uint64_t *pub, size_t n_public, const uint64_t *alpha_beta, char *err, size_t errlen))
