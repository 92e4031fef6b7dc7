/* CPU build: the shared arithmetic plus OpenMP-threaded entry points, bound by cffi. */
#include <stdlib.h>
#include "instances.h"

#define FIELD bn128_fr
#include "field_api.h"
#define FIELD bn128_fp
#include "field_api.h"
#define FIELD bls12381_fr
#include "field_api.h"
#define FIELD bls12381_fp
#include "field_api.h"
#define FIELD bn128_fp2
#include "field_api.h"
#define FIELD bls12381_fp2
#include "field_api.h"

#define PS_TEMPLATE "ntt_cpu.h"
#include "each_fr.h"

#define PS_TEMPLATE "poseidon_cpu.h"
#include "each_fr.h"

#define PS_TEMPLATE "witness_cpu.h"
#include "each_fr.h"

#define PS_TEMPLATE "msm_cpu.h"
#include "each_group.h"

/* the pairings: host only */
#include "pairing_instances.h"

/* Every entry point against its line in api.h: a definition that differs from its declared
 * signature (the one cffi binds) is a compile error here. */
#define PS_API(ret, name, params) ret PS_CAT3(PS_API_CURVE, _, name) params;
#define PS_FIELD_API(ret, name, params) \
  ret PS_CAT3(PS_API_CURVE, _fr_, name) params; ret PS_CAT3(PS_API_CURVE, _fp_, name) params;
#define PS_GROUP_API(ret, name, params) \
  ret PS_CAT3(PS_API_CURVE, _g1_, name) params; ret PS_CAT3(PS_API_CURVE, _g2_, name) params;
#define PS_API_CURVE bn128
#include "api.h"
#undef PS_API_CURVE
#define PS_API_CURVE bls12381
#include "api.h"
#undef PS_API_CURVE
