/* The four groups, G1 over Fp and G2 over Fp2 of each curve: instantiates the template header
 * named by PS_TEMPLATE once per group, so the arithmetic (curve.h, through instances.h) and the
 * CPU and GPU entry points (msm_cpu.h, msm_gpu.h) always cover the same groups.
 * A template sees
 *   CURVE, F   the group's prefix and its coordinate field's (e.g. bls12381_g2, bls12381_fp2)
 *   CN(x)      CURVE_x, a name of this group        FF(x)  F_x, a coordinate-field function
 *   ET         the coordinate field's element type  AFF, XZ  affine and XYZZ point types
 *   GLV_TAG    the prefix of the group's endomorphism constants (curve_glv.h)
 *   GLV_FP     the base field beta lives in: F itself for G1, Fp under G2's Fp2 */
#include "port.h"

#define CN(x) PS_CAT3(CURVE, _, x)
#define FF(x) PS_CAT3(F, _, x)
#define ET FF(t)
#define AFF CN(affine)
#define XZ CN(xyzz)

#define CURVE bn128_g1
#define F bn128_fp
#define GLV_TAG PS_BN128_G1_GLV
#define GLV_FP bn128_fp
#include PS_TEMPLATE
#undef CURVE
#undef F
#undef GLV_TAG
#undef GLV_FP

#define CURVE bn128_g2
#define F bn128_fp2
#define GLV_TAG PS_BN128_G2_GLV
#define GLV_FP bn128_fp
#define GLV_EXT 1
#include PS_TEMPLATE
#undef CURVE
#undef F
#undef GLV_TAG
#undef GLV_FP
#undef GLV_EXT

#define CURVE bls12381_g1
#define F bls12381_fp
#define GLV_TAG PS_BLS12381_G1_GLV
#define GLV_FP bls12381_fp
#include PS_TEMPLATE
#undef CURVE
#undef F
#undef GLV_TAG
#undef GLV_FP

#define CURVE bls12381_g2
#define F bls12381_fp2
#define GLV_TAG PS_BLS12381_G2_GLV
#define GLV_FP bls12381_fp
#define GLV_EXT 1
#include PS_TEMPLATE
#undef CURVE
#undef F
#undef GLV_TAG
#undef GLV_FP
#undef GLV_EXT

#undef CN
#undef FF
#undef ET
#undef AFF
#undef XZ
#undef PS_TEMPLATE
