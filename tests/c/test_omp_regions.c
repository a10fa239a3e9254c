/* test_omp_regions.c — how many OpenMP parallel regions the hot kernels open. A small call,
 * or one made from inside a parallel region (the attention kernel drawing its dropout masks,
 * the dropout and AdamW ops calling their kernels per 4096-element chunk), must open none:
 * `parallel for if (0)` still makes and frees a libgomp team per call, and the attention
 * dropout's per-row draws made 610 k of them a LoRA step. This program defines
 * GOMP_parallel (GCC's entry for every `omp parallel`), counts the calls and forwards them
 * to libgomp's; the kernel objects linked into it call this one. */
#include "check.h"
#include "trainer.h"
#include "cpu/optim.h"
#include "cpu/dropout.h"
#include "cpu/elementwise.h"
#include "cpu/activation.h"
#include "cpu/layernorm.h"

#include <dlfcn.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>

/* ------------------------------------------------------------ the counting GOMP_parallel */

static atomic_long regions;

void GOMP_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags);
void GOMP_parallel(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags)
{
    static void (*real)(void (*)(void *), void *, unsigned, unsigned);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "GOMP_parallel");
    regions++;
    real(fn, data, nthreads, flags);
}

/* ------------------------------------------------------------ cases */

static float *vec(size_t n, float v)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = v + (float)(i % 7) * 0.125f;
    return x;
}

static void test_the_counter_sees_a_region(void)
{
    long before = regions;
    int seen = 0;
#pragma omp parallel
    {
#pragma omp atomic
        seen++;
    }
    CHECK(seen >= 1 && regions == before + 1, "counted %ld regions for one", regions - before);
}

/* The attention kernel's pattern: a block's masks drawn on every thread of its region. */
static void test_masks_drawn_inside_a_region_open_none(void)
{
    const tr_rng_key key = { 1, 2, 3, 4 };
    long before = regions;
#pragma omp parallel
    {
        uint32_t *m = malloc(8192 * sizeof *m);
        uint8_t *b = malloc(8192);
        tr_dropout_mask_words(m, 8192, 0.1f, key, (uint64_t)omp_get_thread_num() * 8192);
        tr_dropout_mask_bits(b, 8192, 0.1f, key, 0);
        free(m);
        free(b);
    }
    CHECK(regions == before + 1, "%ld regions: the draws inside opened %ld", regions - before, regions - before - 1);
    /* a big stream from outside any region still runs in parallel */
    size_t n = 1 << 20;
    uint8_t *big = malloc(n);
    before = regions;
    tr_dropout_mask_bits(big, n, 0.1f, key, 0);
    CHECK(regions == before + 1, "a 1 Mi-element stream opened %ld regions, want 1", regions - before);
    free(big);
}

/* A 4096-element chunk, as the dropout and AdamW ops pass them, and small elementwise,
 * GELU and layernorm calls: no region. */
static void test_small_kernel_calls_open_none(void)
{
    enum { N = 4096 };
    float *x = vec(N, 0.5f), *y = vec(N, -0.25f), *o = vec(N, 0), *m = vec(N, 0), *v = vec(N, 0);
    uint32_t *mask = malloc(N * sizeof *mask);
    for (int i = 0; i < N; i++) mask[i] = i % 3 ? 0xFFFFFFFFu : 0u;
    float mean[16], rstd[16], dw[256] = { 0 }, db[256] = { 0 };
    long before = regions;
    tr_k_dropout_fwd_f32(o, x, mask, 1.25f, N);
    tr_k_adamw_step_f32(o, m, v, y, N, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f);
    tr_k_add_fwd_f32(o, x, y, 16, 256, 16);
    tr_k_add_fwd_f32(o, x, y, 16, 256, 1);
    tr_k_mul_fwd_f32(o, x, y, 16, 256, 16);
    tr_k_scale_fwd_f32(o, x, 2.0f, N);
    tr_k_axpy_fwd_f32(o, x, 2.0f, N);
    tr_k_fill_fwd_f32(o, 1.0f, N);
    tr_k_gelu_fwd_f32(o, x, N, TR_GELU_ERF);
    tr_k_gelu_bwd_f32(o, y, x, N, TR_GELU_ERF);
    tr_k_layernorm_fwd_f32(o, mean, rstd, x, y, y, 16, 256, 1e-5f);
    tr_k_layernorm_bwd_f32(o, dw, db, y, x, y, mean, rstd, 16, 256);
    CHECK(regions == before, "small calls opened %ld regions, want 0", regions - before);
    free(x); free(y); free(o); free(m); free(v); free(mask);
}

/* Big calls still share the work, in one region each (layernorm's backward too: dx and
 * the weight/bias sums in one region, no barrier between them). */
static void test_big_calls_open_one_region_each(void)
{
    const int64_t N = 512, C = 384, n = N * C;
    float *x = vec((size_t)n, 0.5f), *y = vec((size_t)n, -0.25f), *o = vec((size_t)n, 0);
    float *w = vec((size_t)C, 1.0f), *mean = vec((size_t)N, 0), *rstd = vec((size_t)N, 0);
    float *dw = vec((size_t)C, 0), *dbias = vec((size_t)C, 0);
    long before = regions;
    tr_k_add_fwd_f32(o, x, y, N, C, N);
    CHECK(regions == before + 1, "a big add opened %ld regions, want 1", regions - before);
    tr_k_layernorm_fwd_f32(o, mean, rstd, x, w, w, N, C, 1e-5f);
    before = regions;
    tr_k_layernorm_bwd_f32(o, dw, dbias, y, x, w, mean, rstd, N, C);
    CHECK(regions == before + 1, "layernorm backward opened %ld regions, want 1", regions - before);
    free(x); free(y); free(o); free(w); free(mean); free(rstd); free(dw); free(dbias);
}

int main(void)
{
    RUN(test_the_counter_sees_a_region);
    RUN(test_masks_drawn_inside_a_region_open_none);
    RUN(test_small_kernel_calls_open_none);
    RUN(test_big_calls_open_one_region_each);
    return check_done();
}
