/* bench_ops_elem.c — throughput of the tensor-level ops outside the network layers
 * (core/ops/ops_elementwise.h and its neighbours) on this CPU: memory-bound ops in GB/s
 * of tensor bytes moved (read + written, as stored), so f32 and half paths compare
 * directly, plus the workspace each call took. Prints one table; each time is the best
 * of a few runs. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "trainer.h"
#include "bench_clock.h"

static tr_ctx *ctx;

static tr_tensor *make(int ndim, const int64_t *shape, int dtype, double fill)
{
    tr_tensor *t = tr_tensor_new(ctx, ndim, shape, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    if (!t) {
        fprintf(stderr, "bench: %s\n", tr_ctx_errmsg(ctx));
        exit(1);
    }
    if (dtype == TR_I64)
        for (int64_t i = 0; i < t->numel; i++) ((int64_t *)t->data)[i] = i % 1000;
    else if (tr_tensor_fill(ctx, t, fill)) exit(1);
    return t;
}

/* Runs `call` a few times; prints the best time, GB/s over `bytes` and the workspace peak. */
#define BENCH(name, bytes, call)                                                                     \
    do {                                                                                             \
        double best = 1e30;                                                                          \
        tr_alloc_reset_peak(tr_ctx_alloc(ctx, TR_CPU));                                              \
        for (int rep = 0; rep < 5; rep++) {                                                          \
            double t0 = bench_now();                                                                       \
            if ((call) != TR_OK) {                                                                   \
                fprintf(stderr, "bench %s: %s\n", name, tr_ctx_errmsg(ctx));                         \
                exit(1);                                                                             \
            }                                                                                        \
            double dt = bench_now() - t0;                                                                  \
            if (dt < best) best = dt;                                                                \
        }                                                                                            \
        tr_alloc_stats st;                                                                           \
        tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &st);                                          \
        printf("%-40s %10.3f ms %8.2f GB/s %9.1f MiB\n", name, best * 1e3, (double)(bytes) / best / 1e9, \
               (double)st.tag_peak[TR_TAG_WORKSPACE] / 1048576.0);                                   \
    } while (0)

int main(void)
{
    ctx = tr_ctx_new();
    if (!ctx) return 1;
    printf("%-40s %13s %13s %13s\n", "op", "best", "throughput", "workspace");
    const int64_t N = 8192, C = 1024, n = N * C, sh[2] = { N, C }, shc[1] = { C };
    int dtypes[2] = { TR_F32, TR_BF16 };
    for (int di = 0; di < 2; di++) {
        int dt = dtypes[di];
        size_t es = tr_dtype_size(dt);
        char name[64];
        tr_tensor *a = make(2, sh, dt, 0.5), *b = make(2, sh, dt, 0.25), *o = make(2, sh, dt, 0);
        tr_tensor *bias = make(1, shc, TR_F32, 1);
        snprintf(name, sizeof name, "add [8192,1024] %s", tr_dtype_name(dt));
        BENCH(name, 3.0 * n * es, tr_op_add(ctx, o, a, b));
        snprintf(name, sizeof name, "mul broadcast [8192,1024] %s", tr_dtype_name(dt));
        BENCH(name, 2.0 * n * es, tr_op_mul(ctx, o, a, bias));
        snprintf(name, sizeof name, "axpy [8192,1024] %s", tr_dtype_name(dt));
        BENCH(name, 3.0 * n * es, tr_op_axpy(ctx, o, a, 0.5f));
        tr_rng_key key = { 1, 2, 3, 4 };
        snprintf(name, sizeof name, "dropout p=0.1 [8192,1024] %s", tr_dtype_name(dt));
        BENCH(name, 2.0 * n * es, tr_op_dropout(ctx, o, a, 0.1f, &key, 0));
        snprintf(name, sizeof name, "l2norm [8192,1024] %s", tr_dtype_name(dt));
        BENCH(name, 2.0 * n * es, tr_op_l2norm(ctx, o, a, 1e-12f));
        int64_t one = 1;
        tr_tensor *s = make(0, &one, TR_F32, 0);
        snprintf(name, sizeof name, "sum [8192,1024] %s", tr_dtype_name(dt));
        BENCH(name, 1.0 * n * es, tr_op_sum(ctx, s, a, 0));
        snprintf(name, sizeof name, "cast f32 <-> %s", tr_dtype_name(dt));
        tr_tensor *f = make(2, sh, TR_F32, 1);
        BENCH(name, 1.0 * n * (es + 4), tr_op_cast(ctx, o, f));
        int64_t shp[3] = { 64, 128, 1024 }, shpo[2] = { 64, 1024 }, shm[2] = { 64, 128 };
        tr_tensor *hidden = tr_tensor_reshape(ctx, a, 3, shp), *pooled = make(2, shpo, dt, 0);
        tr_tensor *mask = make(2, shm, TR_I64, 0);
        snprintf(name, sizeof name, "pool mean [64,128,1024] %s", tr_dtype_name(dt));
        BENCH(name, 1.0 * n * es, tr_op_pool(ctx, pooled, hidden, NULL, TR_POOL_MEAN));
        int64_t shl[2] = { 256, 30522 }, ids = 256;
        tr_tensor *logits = make(2, shl, dt, 0.1), *lse = make(1, &ids, TR_F32, 0), *tg = make(1, &ids, TR_I64, 0);
        snprintf(name, sizeof name, "cross_entropy [256,30522] %s", tr_dtype_name(dt));
        BENCH(name, 256.0 * 30522 * es, tr_op_cross_entropy(ctx, s, lse, logits, tg, -100, 0));
        snprintf(name, sizeof name, "cross_entropy_backward in place %s", tr_dtype_name(dt));
        BENCH(name, 2.0 * 256 * 30522 * es, tr_op_cross_entropy_backward(ctx, logits, 1, logits, lse, tg, -100, 0));
        tr_tensor_free(a), tr_tensor_free(b), tr_tensor_free(o), tr_tensor_free(bias), tr_tensor_free(s);
        tr_tensor_free(f), tr_tensor_free(hidden), tr_tensor_free(pooled), tr_tensor_free(mask);
        tr_tensor_free(logits), tr_tensor_free(lse), tr_tensor_free(tg);
    }
    /* AdamW on 8M parameters: param, m, v f32 read+written, grad read, half copy written */
    tr_tensor *p = make(2, sh, TR_F32, 0.1), *m = make(2, sh, TR_F32, 0), *v = make(2, sh, TR_F32, 0);
    tr_tensor *g = make(2, sh, TR_BF16, 0.01), *h = make(2, sh, TR_BF16, 0), *g32 = make(2, sh, TR_F32, 0.01);
    int64_t step = 0;
    BENCH("adamw 8M f32 grad, no half copy", n * (6.0 * 4 + 4),
          tr_op_adamw(ctx, p, g32, m, v, NULL, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, ++step, 1));
    BENCH("adamw 8M bf16 grad, bf16 half copy", n * (6.0 * 4 + 2 + 2),
          tr_op_adamw(ctx, p, g, m, v, h, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, ++step, 1));
    tr_tensor *list[3] = { p, g, g32 };
    float norm;
    BENCH("global_norm f32+bf16+f32 (24M)", n * 10.0, tr_op_global_norm(ctx, &norm, list, 3));
    int found;
    BENCH("scale_check_finite f32+bf16+f32 (24M)", n * 20.0, tr_op_scale_check_finite(ctx, &found, list, 3, 1.0f));
    tr_tensor_free(p), tr_tensor_free(m), tr_tensor_free(v), tr_tensor_free(g), tr_tensor_free(h), tr_tensor_free(g32);
    tr_ctx_free(ctx);
    return 0;
}
