/* CPU entry point of Poseidon's width-3 permutation (poseidon.h) over one Fr: n states of three
 * elements each, permuted in place, standard form in and out, as are the constants (made
 * Montgomery once a call). Instantiated once per Fr by each_fr.h (FIELD, FN, FT). */
#include "poseidon.h"

void FN(poseidon3_batch)(u64 *states_, size_t n, const u64 *rc_, const u64 *mds_, int r_f, int r_p, int threads) {
    const size_t nrc = 3 * (size_t)(r_f + r_p);
    FT *rc = (FT *)malloc((nrc ? nrc : 1) * sizeof(FT)), mds[9];
    if (!rc) return;
    for (size_t i = 0; i < nrc; i++) { memcpy(&rc[i], rc_ + 4 * i, sizeof(FT)); FN(to_mont)(&rc[i], &rc[i]); }
    for (int i = 0; i < 9; i++) { memcpy(&mds[i], mds_ + 4 * i, sizeof(FT)); FN(to_mont)(&mds[i], &mds[i]); }
    FT *st = (FT *)states_;
    #pragma omp parallel for schedule(static) num_threads(threads) if (n >= 256)
    for (size_t i = 0; i < n; i++) {
        FT *s = st + 3 * i;
        for (int j = 0; j < 3; j++) FN(to_mont)(&s[j], &s[j]);
        FN(poseidon3)(s, rc, mds, r_f, r_p);
        for (int j = 0; j < 3; j++) FN(from_mont)(&s[j], &s[j]);
    }
    free(rc);
}
