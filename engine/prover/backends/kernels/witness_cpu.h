/* A compiled circuit's witness program (engine.circuits.program) run over one partition's
 * inputs, with the values of its constraint rows: row by row, first the input allocations
 * recorded before row r, then row r. A solving row defines the one variable of its C row,
 * v = (A_r w)(B_r w); every row yields a_r = A_r w, b_r = B_r w and c_r = C_r w, so the
 * witness and the three products come out of one pass over the matrices: CSR, each entry's
 * coefficient an index into the few distinct ones (coefficients, 1 first), made Montgomery
 * once a run, so that a term c w is the one product (c R) w / R. A B row equal to an earlier
 * (or the same) row's A is copied from its value (b_src), not summed again: an S-box's input
 * feeds three products.
 * Standard form in and out. Instantiated once per Fr by each_fr.h (FIELD, FN, FT). */

static inline int FN(is_one_std)(const FT *a) {
    u64 acc = a->v[0] ^ 1;
    UNROLL for (int i = 1; i < 4; i++) acc |= a->v[i];
    return acc == 0;
}

/* sum_k c_k w[cols_k] over row r, standard form: a lone variable of coefficient 1 is its value;
 * else a term of the constant variable (w[0] = 1, first in a row: columns are sorted) adds c,
 * a term of coefficient 1 adds w, and any other the Montgomery product (c R) w / R = c w. */
static void FN(row_value)(FT *out, const i64 *ptr, const i64 *cols, const u32 *coef, const FT *std, const FT *mont,
                          const FT *w, size_t r) {
    i64 k = ptr[r];
    const i64 end = ptr[r + 1];
    if (end - k == 1 && coef[k] == 0) { *out = w[cols[k]]; return; }
    FT acc, t;
    if (k < end && cols[k] == 0) acc = std[coef[k++]];
    else FN(zero)(&acc);
    for (; k < end; k++) {
        const FT *x = &w[cols[k]];
        if (coef[k] == 0) { FN(add)(&acc, &acc, x); continue; }
        FN(mul)(&t, &mont[coef[k]], x);
        FN(add)(&acc, &acc, &t);
    }
    *out = acc;
}

/* r = x y, standard form: the Montgomery product x y / R lifted by R^2, unless a factor is 1
 * (a materialised lane's row: v = a 1) or 0 (an unset bit's swap). */
static void FN(product_std)(FT *r, const FT *x, const FT *y) {
    if (FN(is_one_std)(x)) { *r = *y; return; }
    if (FN(is_one_std)(y)) { *r = *x; return; }
    if (FN(is_zero)(x) || FN(is_zero)(y)) { FN(zero)(r); return; }
    FN(mul)(r, x, y);
    FN(to_mont)(r, r);
}

/* ops: (before row, variable, slot, bit) a row, sorted by row; bit -1 takes the slot's value
 * mod p, else its bit. inputs: the slots' raw 256-bit values. A solving row's C row is its
 * variable alone (coefficient 1), which the program's loader checked. Returns -1, -2 when the
 * table cannot be allocated, or with check the first non-solving row where a b != c (a solving
 * row holds by construction). */
int64_t FN(witness_run)(u64 *w_, u64 *a_, u64 *b_, u64 *c_, const u64 *inputs_, const i64 *ops, size_t n_ops,
                        const unsigned char *solves, const i64 *b_src, const u64 *coefficients, size_t n_coefficients,
                        const i64 *a_ptr, const i64 *a_cols, const u32 *a_coef, const i64 *b_ptr, const i64 *b_cols,
                        const u32 *b_coef, const i64 *c_ptr, const i64 *c_cols, const u32 *c_coef, size_t rows,
                        int check) {
    FT *w = (FT *)w_, *a = (FT *)a_, *b = (FT *)b_, *c = (FT *)c_;
    const FT *in = (const FT *)inputs_, *std = (const FT *)coefficients;
    FT *mont = (FT *)malloc((n_coefficients ? n_coefficients : 1) * sizeof(FT));
    if (!mont) return -2;
    for (size_t i = 0; i < n_coefficients; i++) FN(to_mont)(&mont[i], &std[i]);
    int64_t bad = -1;
    size_t k = 0;
    FN(zero)(&w[0]); w[0].v[0] = 1;
    for (size_t r = 0; r <= rows; r++) {
        for (; k < n_ops && (size_t)ops[4 * k] == r; k++) {
            const i64 *op = ops + 4 * k;
            const FT *raw = &in[op[2]];
            FT *x = &w[op[1]];
            if (op[3] >= 0) {
                FN(zero)(x);
                x->v[0] = op[3] < 256 ? (raw->v[op[3] / 64] >> (op[3] % 64)) & 1 : 0;
            } else {
                *x = *raw;
                while (!FN(is_reduced)(x)) FN(reduce_once)(x, x, 0);
            }
        }
        if (r == rows) break;
        FN(row_value)(&a[r], a_ptr, a_cols, a_coef, std, mont, w, r);
        if (b_src[r] >= 0) b[r] = a[b_src[r]];
        else FN(row_value)(&b[r], b_ptr, b_cols, b_coef, std, mont, w, r);
        FT ab;
        if (solves[r] || check) FN(product_std)(&ab, &a[r], &b[r]);
        if (solves[r]) {
            w[c_cols[c_ptr[r]]] = ab;
            c[r] = ab;
            continue;
        }
        FN(row_value)(&c[r], c_ptr, c_cols, c_coef, std, mont, w, r);
        if (check && bad < 0 && !FN(eq)(&ab, &c[r])) bad = (int64_t)r;
    }
    free(mont);
    return bad;
}
