/* The pairings of both curves and the Groth16 steps built on them (host only: gpu.cu does not
 * include this). The per-curve constants (PS_<CURVE>_XI0 etc.) come from
 * engine/prover/pairing.py's prelude; PC_LABEL names the curve in error messages. */
#define PC bn128
#define PC_LABEL "BN254"
#define F1 bn128_fp
#define F2 bn128_fp2
#define G1C bn128_g1
#define G2C bn128_g2
#define NL 4
#define XI0 PS_BN128_XI0
#define FROB PS_BN128_FROB
#define TWIST_D 1
#define NEG_U 0
#define BN_FROB_STEPS 1
#define LOOP PS_BN128_LOOP
#define LOOP_LEN PS_BN128_LOOP_LEN
#define HARD PS_BN128_HARD
#define HARD_BITS PS_BN128_HARD_BITS
#define BCOEF PS_BN128_B
#define B2COEF PS_BN128_B2
#define RORD PS_BN128_R
#define HALF PS_BN128_HALF
#define PSI_X PS_BN128_PSI_X
#define PSI_Y PS_BN128_PSI_Y
#define PSI_K PS_BN128_PSI_K
#define PSI_NEG PS_BN128_PSI_NEG
#define HPOLY PS_BN128_HPOLY
#define HPOLY_K PS_BN128_HPOLY_K
#define HPOLY_BITS PS_BN128_HPOLY_BITS
#define UNAF PS_BN128_UNAF
#define UNAF_LEN PS_BN128_UNAF_LEN
#define G1_SUBGROUP 0
#include "pairing.h"
#include "groth16.h"
#include "pairing_undef.h"

#define PC bls12381
#define PC_LABEL "BLS12-381"
#define F1 bls12381_fp
#define F2 bls12381_fp2
#define G1C bls12381_g1
#define G2C bls12381_g2
#define NL 6
#define XI0 PS_BLS12381_XI0
#define FROB PS_BLS12381_FROB
#define TWIST_D 0
#define NEG_U 1
#define BN_FROB_STEPS 0
#define LOOP PS_BLS12381_LOOP
#define LOOP_LEN PS_BLS12381_LOOP_LEN
#define HARD PS_BLS12381_HARD
#define HARD_BITS PS_BLS12381_HARD_BITS
#define BCOEF PS_BLS12381_B
#define B2COEF PS_BLS12381_B2
#define RORD PS_BLS12381_R
#define HALF PS_BLS12381_HALF
#define PSI_X PS_BLS12381_PSI_X
#define PSI_Y PS_BLS12381_PSI_Y
#define PSI_K PS_BLS12381_PSI_K
#define PSI_NEG PS_BLS12381_PSI_NEG
#define HPOLY PS_BLS12381_HPOLY
#define HPOLY_K PS_BLS12381_HPOLY_K
#define HPOLY_BITS PS_BLS12381_HPOLY_BITS
#define UNAF PS_BLS12381_UNAF
#define UNAF_LEN PS_BLS12381_UNAF_LEN
#define G1_SUBGROUP 1
#define G1_BETA PS_BLS12381_G1_BETA
#define G1_K PS_BLS12381_G1_K
#include "pairing.h"
#include "groth16.h"
#include "pairing_undef.h"
