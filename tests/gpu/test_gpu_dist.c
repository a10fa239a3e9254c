/* test_gpu_dist.c — the NCCL path of core/dist on one rank and one GPU: a world
 * of one (no mpirun) loads libnccl, makes its own unique id and communicator, and reduces
 * CUDA gradients in several buckets on its own stream, ordered with the compute stream.
 * The mean over one rank is the tensor itself, bitwise; the bucket count shows that the
 * bucketing ran. The overlapped form (begin, ready as backward would call it, finish) issues
 * its buckets at the ready calls and gives the same bits. Without a GPU, or without libnccl on the machine, it prints
 * SKIP. */
#include "check.h"
#include "trainer.h"

#include <stdio.h>
#include <string.h>

static tr_ctx *ctx;
static tr_dist *dist;

/* overlapped: the all-reduce in three calls (dist.h), else tr_dist_allreduce_grads */
static void run_nccl_one_rank(int overlapped)
{
    enum { NT = 3 };
    const int64_t sizes[NT] = {1000, 37, 4096};
    tr_tensor *g[NT] = {NULL, NULL, NULL};
    float *want[NT] = {NULL, NULL, NULL};
    for (int i = 0; i < NT; i++) {
        g[i] = tr_tensor_new(ctx, 1, &sizes[i], TR_F32, 0, TR_TAG_GRADS);
        CHECK(g[i] != NULL, "tensor on cuda:0: %s", tr_ctx_errmsg(ctx));
        want[i] = malloc((size_t)sizes[i] * sizeof(float));
        CHECK(want[i] != NULL, "malloc");
        if (!g[i] || !want[i]) goto out;
        for (int64_t k = 0; k < sizes[i]; k++) want[i][k] = (float)(i + 1) * 0.25f + (float)k * 1e-3f;
        CHECK(tr_tensor_write(ctx, g[i], want[i], (size_t)sizes[i] * 4) == 0, "write: %s", tr_ctx_errmsg(ctx));
    }
    tr_dist_stats before, after;
    tr_dist_get_stats(dist, &before);
    /* 8 KiB buckets: the 16 KiB tensor alone, then the two small ones together */
    int st;
    if (overlapped) {
        /* as backward would: the last tensor final first (its bucket starts), then the rest */
        st = tr_dist_grads_begin(dist, ctx, g, NT, 8192);
        if (st == 0) st = tr_dist_grads_ready(dist, ctx, 2);
        if (st == 0) st = tr_dist_grads_ready(dist, ctx, 0);
        if (st == 0) st = tr_dist_grads_finish(dist, ctx);
    } else {
        st = tr_dist_allreduce_grads(dist, ctx, g, NT, 8192);
    }
    CHECK(st == 0, "allreduce: %s", tr_ctx_errmsg(ctx));
    tr_dist_get_stats(dist, &after);
    CHECK(after.buckets - before.buckets == 2, "%lld buckets", (long long)(after.buckets - before.buckets));
    int64_t early = after.buckets_overlapped - before.buckets_overlapped;
    CHECK(early == (overlapped ? 2 : 0), "%lld buckets issued before finish", (long long)early);
    for (int i = 0; i < NT && st == 0; i++) {
        float *got = malloc((size_t)sizes[i] * sizeof(float));
        CHECK(got != NULL, "malloc");
        if (!got) break;
        CHECK(tr_tensor_read(ctx, g[i], got, (size_t)sizes[i] * 4) == 0, "read: %s", tr_ctx_errmsg(ctx));
        CHECK(memcmp(got, want[i], (size_t)sizes[i] * 4) == 0, "tensor %d changed by the mean over one rank", i);
        free(got);
    }
out:
    for (int i = 0; i < NT; i++) {
        tr_tensor_free(g[i]);
        free(want[i]);
    }
}

static void test_nccl_allreduce_one_rank(void)
{
    run_nccl_one_rank(0);
}

static void test_nccl_allreduce_overlapped_one_rank(void)
{
    run_nccl_one_rank(1);
}

int main(void)
{
    if (tr_cuda_device_count() < 1) {
        printf("SKIP test_gpu_dist: no CUDA device is visible\n");
        return 0;
    }
    if (!tr_dist_have_nccl()) {
        printf("SKIP test_gpu_dist: this build has no NCCL (nccl.h was not found beside the CUDA toolkit)\n");
        return 0;
    }
    ctx = tr_ctx_new();
    if (!ctx || tr_dist_init(ctx, 60, &dist) != 0) {
        printf("FAIL dist_init: %s\n", ctx ? tr_ctx_errmsg(ctx) : "no context");
        return 1;
    }
    if (tr_dist_use_nccl(dist, ctx, 0) != 0) {
        const tr_error *e = tr_ctx_err(ctx);
        if (e->status == TR_EUSER && strstr(e->msg, "cannot load libnccl")) {
            printf("SKIP test_gpu_dist: %s\n", e->msg);
            tr_dist_free(dist);
            tr_ctx_free(ctx);
            return 0;
        }
        printf("FAIL nccl_init: %s\n", e->msg);
        return 1;
    }
    RUN(test_nccl_allreduce_one_rank);
    RUN(test_nccl_allreduce_overlapped_one_rank);
    tr_dist_free(dist);
    tr_ctx_free(ctx);
    return check_done();
}
