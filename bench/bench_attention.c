/* bench_attention.c — the tiled CPU attention (tr_op_attention, kernels/cpu/attention.c)
 * against a naive attention that materialises the T x T probabilities (written here, with
 * the same BLAS calls per (b, h)), at B=8, H=12, D=64, T = 128, 256, 512, f32, no mask,
 * no dropout. Times are the best of 5 runs (the machine is shared); "extra" is the memory each needs beyond q, k,
 * v, out and their gradients: for the tiled op the allocator's measured workspace peak
 * plus the saved lse; for the naive one the saved P (forward) plus dP (backward). The max
 * difference between the two outputs is printed as a sanity check. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer.h"
#include "cpu/attention.h"
#include "bench_clock.h"

/* ------------------------------------------------------------ naive attention */

typedef struct {
    int64_t B, T, H, D;
    float scale;
    float *P;     /* [B, H, T, T] saved probabilities */
    float *dP;    /* [B, H, T, T] backward buffer */
} naive;

static void naive_forward(naive *n, float *out, const float *q, const float *k, const float *v)
{
    int64_t B = n->B, T = n->T, H = n->H, D = n->D, ld = H * D;
#pragma omp parallel for schedule(dynamic)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H, base = b * T * ld + h * D;
        float *P = n->P + bh * T * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, n->scale, q + base,
                    (int)ld, k + base, (int)ld, 0, P, (int)T);
        for (int64_t i = 0; i < T; i++) {
            float *r = P + i * T, mx = -INFINITY, s = 0;
            for (int64_t j = 0; j < T; j++) mx = r[j] > mx ? r[j] : mx;
            for (int64_t j = 0; j < T; j++) s += (r[j] = expf(r[j] - mx));
            for (int64_t j = 0; j < T; j++) r[j] /= s;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1, P, (int)T,
                    v + base, (int)ld, 0, out + base, (int)ld);
    }
}

static void naive_backward(naive *n, float *dq, float *dk, float *dv, const float *dout,
                           const float *q, const float *k, const float *v)
{
    int64_t B = n->B, T = n->T, H = n->H, D = n->D, ld = H * D;
#pragma omp parallel for schedule(dynamic)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H, base = b * T * ld + h * D;
        float *P = n->P + bh * T * T, *dP = n->dP + bh * T * T;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)T, 1, P, (int)T,
                    dout + base, (int)ld, 0, dv + base, (int)ld);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)D, 1, dout + base,
                    (int)ld, v + base, (int)ld, 0, dP, (int)T);
        for (int64_t i = 0; i < T; i++) {
            float *p = P + i * T, *g = dP + i * T, dot = 0;
            for (int64_t j = 0; j < T; j++) dot += p[j] * g[j];
            for (int64_t j = 0; j < T; j++) g[j] = p[j] * (g[j] - dot);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)T, n->scale, dP,
                    (int)T, k + base, (int)ld, 0, dq + base, (int)ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)T, n->scale, dP,
                    (int)T, q + base, (int)ld, 0, dk + base, (int)ld);
    }
}

/* ------------------------------------------------------------ main */

static tr_tensor *filled(tr_ctx *ctx, const int64_t *shape, unsigned seed)
{
    tr_tensor *t = tr_tensor_new(ctx, 4, shape, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    float *d = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        seed = seed * 1664525u + 1013904223u;
        d[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return t;
}

int main(int argc, char **argv)
{
    tr_ctx *ctx = tr_ctx_new();
    /* bench_attention [--tiled-only] [B H D T...]: another shape (MiniLM's: 32 12 32 128);
     * --tiled-only skips the naive attention, for a profile of the tiled one alone */
    int64_t B = 8, H = 12, D = 64, Ts[8] = { 128, 256, 512 };
    int nT = 3, tiled_only = argc > 1 && strcmp(argv[1], "--tiled-only") == 0;
    if (tiled_only) argc--, argv++;
    if (argc >= 5) {
        B = atoll(argv[1]); H = atoll(argv[2]); D = atoll(argv[3]);
        nT = 0;
        for (int i = 4; i < argc && nT < 8; i++) Ts[nT++] = atoll(argv[i]);
    }
    printf("attention, B=%lld H=%lld D=%lld, f32, %d threads; ms best of 5; extra = memory beyond "
           "q/k/v/out and grads\n\n",
           (long long)B, (long long)H, (long long)D, tr_k_attention_threads());
    printf("%5s | %9s %9s %11s | %9s %9s %11s | %9s %8s | %s\n", "T", "tiled fwd", "tiled bwd",
           "tiled extra", "naive fwd", "naive bwd", "naive extra", "mem ratio", "max diff",
           "tiled GFLOP/s fwd bwd");
    for (int s = 0; s < nT; s++) {
        int64_t T = Ts[s], shape[4] = { B, T, H, D }, ls[3] = { B, H, T };
        tr_tensor *q = filled(ctx, shape, 1), *k = filled(ctx, shape, 2), *v = filled(ctx, shape, 3);
        tr_tensor *g = filled(ctx, shape, 4), *o = filled(ctx, shape, 5), *dq = filled(ctx, shape, 6);
        tr_tensor *dk = filled(ctx, shape, 7), *dv = filled(ctx, shape, 8);
        tr_tensor *lse = tr_tensor_new(ctx, 3, ls, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
        tr_alloc *a = tr_ctx_alloc(ctx, TR_CPU);
        tr_alloc_reset_peak(a);
        double tf = 1e30, tb = 1e30;
        for (int r = 0; r < 5; r++) {
            double t0 = bench_now();
            if (tr_op_attention(ctx, o, lse, q, k, v, NULL, 0, 0, NULL, NULL, 0, 0, 0, 0)) {
                printf("attention: %s\n", tr_ctx_errmsg(ctx));
                return 1;
            }
            double t1 = bench_now();
            if (tr_op_attention_backward(ctx, dq, dk, dv, g, q, k, v, o, lse, NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0, 0)) {
                printf("attention_backward: %s\n", tr_ctx_errmsg(ctx));
                return 1;
            }
            double t2 = bench_now();
            tf = t1 - t0 < tf ? t1 - t0 : tf;
            tb = t2 - t1 < tb ? t2 - t1 : tb;
        }
        tr_alloc_stats st;
        tr_alloc_get_stats(a, &st);
        double tiled_extra = (double)st.tag_peak[TR_TAG_WORKSPACE] + (double)tr_tensor_nbytes(lse);

        /* naive, with BLAS single-threaded inside the OpenMP loop as the tiled kernel does */
        naive nv = { B, T, H, D, 1.0f / sqrtf((float)D), malloc(4 * B * H * T * T),
                     malloc(4 * B * H * T * T) };
        float *no = malloc(4 * q->numel), *ndq = malloc(4 * q->numel), *ndk = malloc(4 * q->numel),
              *ndv = malloc(4 * q->numel);
        int prev = openblas_get_num_threads();
        openblas_set_num_threads(1);
        double nf = 1e30, nb = 1e30;
        for (int r = 0; r < (tiled_only ? 0 : 5); r++) {
            double t0 = bench_now();
            naive_forward(&nv, no, q->data, k->data, v->data);
            double t1 = bench_now();
            naive_backward(&nv, ndq, ndk, ndv, g->data, q->data, k->data, v->data);
            double t2 = bench_now();
            nf = t1 - t0 < nf ? t1 - t0 : nf;
            nb = t2 - t1 < nb ? t2 - t1 : nb;
        }
        openblas_set_num_threads(prev);
        if (tiled_only) nf = nb = NAN;
        double naive_extra = 2.0 * 4 * B * H * T * T;
        double diff = tiled_only ? NAN : 0;
        const float *to = o->data, *tdq = dq->data;
        for (int64_t i = 0; i < (tiled_only ? 0 : q->numel); i++) {
            double d1 = fabs((double)to[i] - no[i]), d2 = fabs((double)tdq[i] - ndq[i]);
            diff = d1 > diff ? d1 : diff;
            diff = d2 > diff ? d2 : diff;
        }
        /* products only: 2 of T x T x D forward, 5 backward (scores again, dV, dP, dQ, dK) */
        double flop = 2.0 * B * H * T * T * D;
        printf("%5lld | %9.1f %9.1f %8.2f MiB | %9.1f %9.1f %8.1f MiB | %8.1fx %8.1e | %6.1f %6.1f\n",
               (long long)T, 1e3 * tf, 1e3 * tb, tiled_extra / 1048576.0, 1e3 * nf, 1e3 * nb,
               naive_extra / 1048576.0, naive_extra / tiled_extra, diff, 2 * flop / tf / 1e9,
               5 * flop / tb / 1e9);
        free(nv.P); free(nv.dP); free(no); free(ndq); free(ndk); free(ndv);
        tr_tensor *all[] = { q, k, v, g, o, dq, dk, dv, lse };
        for (int i = 0; i < 9; i++) tr_tensor_free(all[i]);
    }
    tr_ctx_free(ctx);
    return 0;
}
