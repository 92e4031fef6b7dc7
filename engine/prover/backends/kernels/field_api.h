/* CPU entry points over one field, prime or Fp2 (std form in and out). Define FIELD. */
#define FN(x) PS_CAT3(FIELD, _, x)
#define FT FN(t)

/* op: 0 add, 1 sub, 2 mul, 3 inv (0 -> 0), 4 square. Elements are converted to Montgomery form and back. */
void FN(vec_op)(u64 *out, const u64 *a, const u64 *b, size_t n, int op, int threads) {
    const int nl = (int)(sizeof(FT) / 8);
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 4096)
    for (size_t i = 0; i < n; i++) {
        FT x, y, z;
        memcpy(&x, a + i * nl, sizeof(FT));
        if (op < 3) memcpy(&y, b + i * nl, sizeof(FT));
        FN(to_mont)(&x, &x);
        if (op < 3) FN(to_mont)(&y, &y);
        switch (op) {
        case 0: FN(add)(&z, &x, &y); break;
        case 1: FN(sub)(&z, &x, &y); break;
        case 2: FN(mul)(&z, &x, &y); break;
        case 3: FN(inv)(&z, &x); break;
        default: FN(sqr)(&z, &x); break;
        }
        FN(from_mont)(&z, &z);
        memcpy(out + i * nl, &z, sizeof(FT));
    }
}

#undef FN
#undef FT
#undef FIELD
