/* gpu_testutil.h — what the GPU test programs share: the device fixtures (cuda:0's
 * caching allocator, state and compute stream), a reproducible random generator,
 * reference f32 <-> bf16/f16 conversions written independently of core/tensor/convert.c, typed
 * host element access, and guarded device buffers (guard bytes around every output that
 * must survive a kernel). Header-only, included once per test program. */
#ifndef TR_GPU_TESTUTIL_H
#define TR_GPU_TESTUTIL_H

#include "check.h"
#include "trainer.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ fixtures */

static tr_alloc *dev_alloc;      /* cuda:0's caching allocator */
static void *dev_state;          /* cuda:0's state */
static cudaStream_t dev_stream;  /* its compute stream (non-blocking) */
static int cases_run;

#define TEST(fn)                                                                             \
    do {                                                                                     \
        RUN(fn);                                                                             \
        cases_run++;                                                                         \
    } while (0)

/* cuda:0 as the tests' device (dev_alloc, dev_state, dev_stream): 0, or 1 after printing
 * the FAIL line and the count. */
static inline int gt_init_device(void)
{
    tr_error err;
    if (tr_cuda_init_device(NULL, 0, &dev_alloc, &dev_state, &err) != TR_OK) {
        printf("FAIL init_device: %s\n0 passed, 1 failed\n", err.msg);
        return 1;
    }
    dev_stream = (cudaStream_t)tr_cuda_stream(dev_state);
    return 0;
}

/* After the last case: an error a kernel left on the device fails one more case,
 * device_state_at_exit. */
static inline void gt_check_device_at_exit(void)
{
    cudaError_t last = cudaDeviceSynchronize();
    if (last != cudaSuccess) {
        printf("FAIL device_state_at_exit: %s\n", cudaGetErrorString(last));
        check_cases_failed++;
        cases_run++;
    }
}

/* The closing "N passed, N failed" line; returns the exit status. */
static inline int gt_done(void)
{
    printf("%d passed, %d failed\n", cases_run - check_cases_failed, check_cases_failed);
    return check_done();
}

/* A CUDA call inside a test: a failure fails the case with the statement. */
#define TCUDA(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        CHECK(e_ == cudaSuccess, "%s -> %s", #call, cudaGetErrorString(e_));                 \
    } while (0)

/* ------------------------------------------------------------ random numbers */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline uint32_t rnd_u32(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* Uniform in [-1, 1). */
static inline float rnd_unit(void) { return (float)((double)rnd_u32() / 2147483648.0 - 1.0); }

/* ------------------------------------------------------------ reference conversions */

static inline uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static inline uint16_t ref_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float ref_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

static inline uint16_t ref_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign; /* below half the smallest subnormal */
        uint32_t full = man | 0x800000u;
        int shift = 14 - e;
        uint32_t r = full >> shift, rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++; /* a carry into the exponent is right */
    return (uint16_t)(sign | r);
}

static inline float ref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

/* Element i of a host array of dtype, as a float. */
static inline float get_f(const void *p, int dtype, size_t i)
{
    switch (dtype) {
    case TR_F32: return ((const float *)p)[i];
    case TR_BF16: return ref_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ref_f16_to_f32(((const uint16_t *)p)[i]);
    }
}

static inline void set_f(void *p, int dtype, size_t i, float v)
{
    switch (dtype) {
    case TR_F32: ((float *)p)[i] = v; break;
    case TR_BF16: ((uint16_t *)p)[i] = ref_f32_to_bf16(v); break;
    default: ((uint16_t *)p)[i] = ref_f32_to_f16(v); break;
    }
}

/* 1 unless TRAINER_NO_MEMORY_CACHING=1 (the sanitizer pass) turned the allocators' caching off
 * at their creation. */
static inline int env_caching(void)
{
    const char *v = getenv("TRAINER_NO_MEMORY_CACHING");
    return !(v && strcmp(v, "1") == 0);
}

/* The bits of v rounded to dtype by the reference conversions (no type punning through a
 * uint32_t buffer: that breaks strict aliasing, and at -O2 the compiler may keep the zero). */
static inline uint32_t ref_bits(int dtype, float v)
{
    if (dtype == TR_F32) {
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        return u;
    }
    return dtype == TR_BF16 ? ref_f32_to_bf16(v) : ref_f32_to_f16(v);
}

/* The raw bits of element i (for bit-exact comparison), and whether it is a NaN. */
static inline uint32_t get_bits(const void *p, int dtype, size_t i)
{
    return dtype == TR_F32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}

static inline int is_nan_bits(uint32_t b, int dtype)
{
    if (dtype == TR_F32) return (b & 0x7fffffffu) > 0x7f800000u;
    if (dtype == TR_BF16) return (b & 0x7fffu) > 0x7f80u;
    return (b & 0x7fffu) > 0x7c00u;
}

/* ------------------------------------------------------------ guarded device buffers */

enum { GUARD = 256 };
static const unsigned char guard_byte = 0xA5;

typedef struct gbuf {
    unsigned char *base; /* from the caching allocator */
    void *data;          /* base + GUARD + offset */
    size_t bytes, offset, total;
} gbuf;

/* A device buffer of `bytes` at `offset` bytes past a 256-aligned start, the rest of the
 * allocation (guards before and after) set to guard_byte. 0 on success. */
static inline int gbuf_new(gbuf *g, size_t bytes, size_t offset)
{
    tr_error err;
    memset(g, 0, sizeof *g);
    g->bytes = bytes;
    g->offset = offset;
    g->total = bytes + offset + 2 * GUARD;
    void *p = NULL;
    int rc = tr_alloc_malloc(dev_alloc, g->total, TR_TAG_ACTIVATIONS, (uintptr_t)dev_stream, &p, &err);
    CHECK(rc == TR_OK, "tr_alloc_malloc(%zu): %s", g->total, err.msg);
    if (rc != TR_OK) return -1;
    g->base = p;
    g->data = g->base + GUARD + offset;
    TCUDA(cudaMemsetAsync(g->base, guard_byte, g->total, dev_stream));
    return 0;
}

static inline void gbuf_free(gbuf *g)
{
    if (g->base) tr_alloc_free(dev_alloc, g->base);
    memset(g, 0, sizeof *g);
}

static inline void h2d(gbuf *g, const void *host, size_t bytes)
{
    TCUDA(cudaMemcpyAsync(g->data, host, bytes, cudaMemcpyHostToDevice, dev_stream));
    TCUDA(cudaStreamSynchronize(dev_stream));
}

static inline void d2h(void *host, const gbuf *g, size_t bytes)
{
    TCUDA(cudaMemcpyAsync(host, g->data, bytes, cudaMemcpyDeviceToHost, dev_stream));
    TCUDA(cudaStreamSynchronize(dev_stream));
}

/* 1 when every byte outside [GUARD + offset, + bytes) still holds guard_byte. */
static inline int gbuf_guards_ok(const gbuf *g)
{
    unsigned char *h = malloc(g->total);
    if (!h) return 0;
    int ok = cudaMemcpyAsync(h, g->base, g->total, cudaMemcpyDeviceToHost, dev_stream) == cudaSuccess &&
             cudaStreamSynchronize(dev_stream) == cudaSuccess;
    for (size_t i = 0; ok && i < g->total; i++)
        if ((i < GUARD + g->offset || i >= GUARD + g->offset + g->bytes) && h[i] != guard_byte) ok = 0;
    free(h);
    return ok;
}


#endif
