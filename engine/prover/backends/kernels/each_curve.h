/* each_group.h's inner loop: includes PS_TEMPLATE once per curve, PS_CURVE naming it, for the
 * group (G1 or G2) that each_group.h has fixed around this include. */
#define PS_CURVE bn128
#include PS_TEMPLATE
#undef PS_CURVE
#define PS_CURVE bls12381
#include PS_TEMPLATE
#undef PS_CURVE
