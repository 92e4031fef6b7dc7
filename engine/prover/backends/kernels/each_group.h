/* The four groups, G1 over Fp and G2 over Fp2 of each curve: instantiates the template header
 * named by PS_TEMPLATE once per group, so the arithmetic (curve.h, through instances.h) and the
 * CPU and GPU entry points (msm_cpu.h, msm_gpu.h) always cover the same groups. Every name is
 * derived from the curve's (PS_CURVE, set by each_curve.h) and the group's, so no group is
 * written out apart. A template sees
 *   CURVE, F   the group's prefix and its coordinate field's (e.g. bls12381_g2, bls12381_fp2)
 *   CN(x)      CURVE_x, a name of this group        FF(x)  F_x, a coordinate-field function
 *   ET         the coordinate field's element type  AFF, XZ  affine and XYZZ point types
 *   GLV_TAG    the prefix of the group's endomorphism constants (params/glv_params.py)
 *   GLV_FP     the base field beta lives in: F itself for G1, Fp under G2's Fp2
 *   GLV_EXT    defined for G2 only: its endomorphism scales both Fp2 coefficients by beta */
#include "port.h"

#define CN(x) PS_CAT3(CURVE, _, x)
#define FF(x) PS_CAT3(F, _, x)
#define ET FF(t)
#define AFF CN(affine)
#define XZ CN(xyzz)
#define GLV_TAG PS_CAT(PS_GLV_, CURVE)
#define GLV_FP PS_CAT(PS_CURVE, _fp)

#define CURVE PS_CAT(PS_CURVE, _g1)
#define F GLV_FP
#include "each_curve.h"
#undef CURVE
#undef F

#define GLV_EXT 1
#define CURVE PS_CAT(PS_CURVE, _g2)
#define F PS_CAT(PS_CURVE, _fp2)
#include "each_curve.h"
#undef GLV_EXT
#undef CURVE
#undef F

#undef CN
#undef FF
#undef ET
#undef AFF
#undef XZ
#undef GLV_TAG
#undef GLV_FP
#undef PS_TEMPLATE
