/* GPU build (NVRTC through CuPy): the same field/curve code as the CPU build, plus kernels.
 * engine/prover/backends/cuda.py prepends the generated constants prelude. */
#include "instances.h"

#define PS_TEMPLATE "ntt_gpu.h"
#include "each_fr.h"

#define PS_TEMPLATE "poseidon_gpu.h"
#include "each_fr.h"

#define PS_TEMPLATE "msm_gpu.h"
#include "each_group.h"
