/* GPU build (NVRTC through CuPy): the same field/curve code as the CPU build, plus kernels.
 * engine/prover/gpu.py prepends the generated constants prelude. */
#include "instances.h"

#define FIELD bn128_fr
#include "gpu_fr.h"
#define FIELD bls12381_fr
#include "gpu_fr.h"

#define CURVE bn128_g1
#define F bn128_fp
#include "gpu_group.h"
#define CURVE bn128_g2
#define F bn128_fp2
#include "gpu_group.h"
#define CURVE bls12381_g1
#define F bls12381_fp
#include "gpu_group.h"
#define CURVE bls12381_g2
#define F bls12381_fp2
#include "gpu_group.h"
