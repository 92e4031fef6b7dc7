/* GPU kernel of Poseidon's width-3 permutation (poseidon.h) over one Fr: one thread a state,
 * permuted in place; states and constants in Montgomery form (k_to_mont makes them so).
 * Instantiated once per Fr by each_fr.h (FIELD, FN, FT). */
#include "poseidon.h"

KERNEL FN(k_poseidon3)(FT *states, const FT *rc, const FT *mds, u64 n, int r_f, int r_p) {
    u64 i = GID; if (i < n) FN(poseidon3)(states + 3 * i, rc, mds, r_f, r_p);
}
