/* Instantiates the four prime fields, the two Fp2 extensions and the four groups (each_group.h).
 * The numeric constants (PS_<FIELD>_MOD etc.) come from a prelude that engine/prover/backends/cpu/native.py
 * generates from engine/prover/params/curves.py, so Python and C share a single source of truth. */
#include "port.h"

#define FIELD bn128_fr
#define NL 4
#define FMOD PS_BN128_FR_MOD
#define FONE PS_BN128_FR_ONE
#define FR2 PS_BN128_FR_R2
#define FPM2 PS_BN128_FR_PM2
#define FINV PS_BN128_FR_INV
#define FLAZY PS_BN128_FR_LAZY
#include "field.h"

#define FIELD bn128_fp
#define NL 4
#define FMOD PS_BN128_FP_MOD
#define FONE PS_BN128_FP_ONE
#define FR2 PS_BN128_FP_R2
#define FPM2 PS_BN128_FP_PM2
#define FINV PS_BN128_FP_INV
#define FLAZY PS_BN128_FP_LAZY
#include "field.h"

#define FIELD bls12381_fr
#define NL 4
#define FMOD PS_BLS12381_FR_MOD
#define FONE PS_BLS12381_FR_ONE
#define FR2 PS_BLS12381_FR_R2
#define FPM2 PS_BLS12381_FR_PM2
#define FINV PS_BLS12381_FR_INV
#define FLAZY PS_BLS12381_FR_LAZY
#include "field.h"

#define FIELD bls12381_fp
#define NL 6
#define FMOD PS_BLS12381_FP_MOD
#define FONE PS_BLS12381_FP_ONE
#define FR2 PS_BLS12381_FP_R2
#define FPM2 PS_BLS12381_FP_PM2
#define FINV PS_BLS12381_FP_INV
#define FLAZY PS_BLS12381_FP_LAZY
#include "field.h"

#define FIELD bn128_fp2
#define BASE bn128_fp
#include "field_fp2.h"

#define FIELD bls12381_fp2
#define BASE bls12381_fp
#include "field_fp2.h"

#define PS_TEMPLATE "curve.h"
#include "each_group.h"
