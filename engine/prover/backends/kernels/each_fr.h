/* The two scalar fields Fr (exponents of the groups, values of the NTT domain): instantiates
 * the template header named by PS_TEMPLATE once per Fr, so the CPU and GPU builds (ntt_cpu.h,
 * ntt_gpu.h) cover the same fields. A template sees FIELD (e.g. bls12381_fr), FN(x) = FIELD_x,
 * FT, the element type, and the field's NTT constants: FR_ROOT (its 2^s-th root of unity as
 * snarkjs picks it, standard form), FR_TWO_ADICITY (s) and FR_NQR (the non-residue behind it). */
#include "port.h"

#define FN(x) PS_CAT3(FIELD, _, x)
#define FT FN(t)

#define FIELD bn128_fr
#define FR_ROOT PS_BN128_FR_ROOT
#define FR_TWO_ADICITY PS_BN128_FR_TWO_ADICITY
#define FR_NQR PS_BN128_FR_NQR
#include PS_TEMPLATE
#undef FIELD
#undef FR_ROOT
#undef FR_TWO_ADICITY
#undef FR_NQR

#define FIELD bls12381_fr
#define FR_ROOT PS_BLS12381_FR_ROOT
#define FR_TWO_ADICITY PS_BLS12381_FR_TWO_ADICITY
#define FR_NQR PS_BLS12381_FR_NQR
#include PS_TEMPLATE
#undef FIELD
#undef FR_ROOT
#undef FR_TWO_ADICITY
#undef FR_NQR

#undef FN
#undef FT
#undef PS_TEMPLATE
