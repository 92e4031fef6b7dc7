/* The two scalar fields Fr (exponents of the groups, values of the NTT domain): instantiates
 * the template header named by PS_TEMPLATE once per Fr, so the CPU and GPU builds (host_fr.h,
 * gpu_fr.h) cover the same fields. A template sees FIELD (e.g. bls12381_fr), FN(x) = FIELD_x
 * and FT, the element type. */
#include "port.h"

#define FN(x) PS_CAT3(FIELD, _, x)
#define FT FN(t)

#define FIELD bn128_fr
#include PS_TEMPLATE
#undef FIELD

#define FIELD bls12381_fr
#include PS_TEMPLATE
#undef FIELD

#undef FN
#undef FT
#undef PS_TEMPLATE
