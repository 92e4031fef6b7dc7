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

#define PS_TEMPLATE "host_fr.h"
#include "each_fr.h"

#define PS_TEMPLATE "host_group.h"
#include "each_group.h"

/* the pairings: host only */
#include "pairing_instances.h"
