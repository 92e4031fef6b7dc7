/* Poseidon's permutation of a width-3 state with the S-box x^5 (Grassi, Khovratovich,
 * Rechberger, Roy, Schofnegger, "Poseidon", USENIX Security 2021), its parameters the caller's:
 * r_f full rounds, half of them before and half after r_p partial ones. Each round adds its
 * three constants, raises every lane (full round) or lane 0 alone (partial round) to the fifth
 * power, then multiplies the state by the 3x3 MDS matrix. State and constants in Montgomery
 * form; rc holds three constants a round, mds is row-major. Compiled into both builds: the
 * CPU's batch entry (poseidon_cpu.h) and the GPU's kernel (poseidon_gpu.h) run this one body.
 * Template per Fr (each_fr.h: FIELD, FN, FT). */

/* x^5 = (x^2)^2 x: three products. */
DEVICE INLINE void FN(pow5)(FT *x) {
    FT x2, x4;
    FN(sqr)(&x2, x);
    FN(sqr)(&x4, &x2);
    FN(mul)(x, &x4, x);
}

DEVICE SOFT void FN(poseidon3)(FT *s, const FT *rc, const FT *mds, int r_f, int r_p) {
    const int half = r_f / 2;
    for (int rnd = 0; rnd < r_f + r_p; rnd++) {
        const FT *k = rc + 3 * rnd;
        const int full = rnd < half || rnd >= half + r_p;
        FT t[3];
        for (int i = 0; i < 3; i++) {
            FN(add)(&t[i], &s[i], &k[i]);
            if (full || i == 0) FN(pow5)(&t[i]);
        }
        /* s = MDS t */
        for (int i = 0; i < 3; i++) {
            FT acc, p;
            FN(mul)(&acc, &mds[3 * i], &t[0]);
            FN(mul)(&p, &mds[3 * i + 1], &t[1]);
            FN(add)(&acc, &acc, &p);
            FN(mul)(&p, &mds[3 * i + 2], &t[2]);
            FN(add)(&s[i], &acc, &p);
        }
    }
}
