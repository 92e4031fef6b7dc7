/* Portability layer: the same arithmetic compiles as C99 (gcc, via cffi) and as CUDA C++
 * (NVRTC / nvcc). Only this file knows which target it is built for. */
#ifndef PS_PORT_H
#define PS_PORT_H

#ifdef __CUDACC__
#define DEVICE __device__
#define INLINE static __forceinline__
#define SOFT static inline
#define NOINL static __noinline__
/* The Montgomery multiplication is kept out of line on the GPU: inlining it into every
 * group operation made the NVRTC build take ~8 minutes for ~7 MB of PTX; as a call it
 * costs a few instructions of ABI traffic against ~300 of arithmetic. */
#define MULFN static __noinline__
#define HOSTDEV __host__ __device__
typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long i64;
DEVICE INLINE u64 mul64hi(u64 a, u64 b) { return __umul64hi(a, b); }
/* lo + hi*2^64 = a*b + c + carry, never overflows 128 bits. In PTX with the carry flag
 * (mad.lo.cc / madc.hi, then add.cc / addc): the portable form's two compares per carry
 * cost the GPU's Montgomery product a third of its instructions. */
#define MAC(lo, carry, a, b, c)                                   \
    do {                                                          \
        u64 _l, _h;                                               \
        asm("mad.lo.cc.u64 %0, %2, %3, %4;\n\t"                  \
            "madc.hi.u64 %1, %2, %3, 0;\n\t"                      \
            "add.cc.u64 %0, %0, %5;\n\t"                          \
            "addc.u64 %1, %1, 0;"                                 \
            : "=&l"(_l), "=&l"(_h)                                \
            : "l"((u64)(a)), "l"((u64)(b)), "l"((u64)(c)), "l"((u64)(carry))); \
        (lo) = _l; (carry) = _h;                                  \
    } while (0)
/* a + b + carry and a - b - borrow over 64-bit limbs; *c is the carry (borrow) in and out. */
DEVICE INLINE u64 ps_adc(u64 a, u64 b, unsigned char *c) {
    u64 x = a + *c, c1 = x < *c, y = x + b;
    *c = (unsigned char)(c1 | (y < x));
    return y;
}
DEVICE INLINE u64 ps_sbb(u64 a, u64 b, unsigned char *c) {
    u64 y = b + *c;
    *c = (unsigned char)((y < *c) | (a < y));
    return a - y;
}
#else
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#define DEVICE
/* INLINE: limb-level primitives, always inlined so the limb loops unroll in place.
 * SOFT: left to the compiler. NOINL: group operations and exponentiations, kept out of line
 * (inlining them everywhere multiplies code size and compile time for no speed gain). */
#define INLINE static inline __attribute__((always_inline))
#define SOFT static inline
#define NOINL static __attribute__((noinline))
#define MULFN static inline __attribute__((always_inline))
#define HOSTDEV
typedef uint64_t u64;
typedef uint32_t u32;
typedef int64_t i64;
typedef unsigned __int128 u128;
static inline u64 mul64hi(u64 a, u64 b) { return (u64)(((u128)a * b) >> 64); }
/* The compiler turns the 128-bit form into mul/add/adc directly. */
#define MAC(lo, carry, a, b, c)                                   \
    do {                                                          \
        u128 _t = (u128)(a) * (b) + (c) + (carry);                \
        (lo) = (u64)_t; (carry) = (u64)(_t >> 64);                \
    } while (0)
/* Carry chains: on x86-64 each limb is one adc/sbb through the flags (the portable compare
 * form above costs gcc twice the instructions, which made a field subtraction 2x an addition). */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline __attribute__((always_inline)) u64 ps_adc(u64 a, u64 b, unsigned char *c) {
    unsigned long long r;
    *c = _addcarry_u64(*c, a, b, &r);
    return r;
}
static inline __attribute__((always_inline)) u64 ps_sbb(u64 a, u64 b, unsigned char *c) {
    unsigned long long r;
    *c = _subborrow_u64(*c, a, b, &r);
    return r;
}
#else
static inline __attribute__((always_inline)) u64 ps_adc(u64 a, u64 b, unsigned char *c) {
    u128 t = (u128)a + b + *c;
    *c = (unsigned char)(t >> 64);
    return (u64)t;
}
static inline __attribute__((always_inline)) u64 ps_sbb(u64 a, u64 b, unsigned char *c) {
    u128 t = (u128)a - b - *c;
    *c = (unsigned char)((t >> 64) & 1);
    return (u64)t;
}
#endif
#endif

/* Full unrolling of the limb loops matters: a rolled 6-limb CIOS keeps t[] in memory and runs
 * several times slower. gcc's default peeling limits stop short of 6x6, so ask explicitly. */
#ifdef __CUDACC__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

/* The grid: a kernel is KERNEL f(...) and finds its thread's index as GID. On the GPU these
 * are CUDA's; the host emulation (tests/prover/grid_emu.py) compiles the same kernel bodies
 * as plain C functions, calls them once per thread index, and supplies GID itself. */
#ifdef __CUDACC__
#define KERNEL extern "C" __global__ void
#define GID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define ps_brev64 __brevll
#else
#define KERNEL void
static inline u64 ps_brev64(u64 x) {
    u64 r = 0;
    for (int i = 0; i < 64; i++) { r = (r << 1) | (x & 1); x >>= 1; }
    return r;
}
#endif

#define PS_CAT_(a, b) a##b
#define PS_CAT(a, b) PS_CAT_(a, b)
#define PS_CAT3(a, b, c) PS_CAT(PS_CAT(a, b), c)

#endif
