/* CPU build: the shared arithmetic plus OpenMP-threaded entry points, bound by cffi. */
#include <stdlib.h>
#include "instances.h"

#define FIELD bn128_fr
#include "host_field.h"
#define FIELD bn128_fp
#include "host_field.h"
#define FIELD bls12381_fr
#include "host_field.h"
#define FIELD bls12381_fp
#include "host_field.h"

#define FIELD bn128_fr
#include "host_fr.h"
#define FIELD bls12381_fr
#include "host_fr.h"

#define CURVE bn128_g1
#define F bn128_fp
#include "host_group.h"
#define CURVE bn128_g2
#define F bn128_fp2
#include "host_group.h"
#define CURVE bls12381_g1
#define F bls12381_fp
#include "host_group.h"
#define CURVE bls12381_g2
#define F bls12381_fp2
#include "host_group.h"
