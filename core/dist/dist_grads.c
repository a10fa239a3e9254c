/* dist_grads.c — the bucketed gradient all-reduce (dist.h: tr_dist_allreduce_grads) and
 * the size of its bucket buffers. The gradients are one stream of floats, last tensor first
 * (the order in which backward completes them), cut into buckets of bucket_bytes.
 *   CPU tensors (MPI): bucket k is packed into one of two host buffers (tag workspace) and
 *     reduced with MPI_Iallreduce while bucket k + 1 is packed; before a buffer is used
 *     again its last bucket is waited for and unpacked, divided by the world size.
 *   CUDA tensors: NCCL when it is on (dist_nccl.c), else each tensor through host memory.
 * Every wait is bounded by the job's timeout (tr_dist_mpi_wait). */
#include "dist_internal.h"

#include <stdlib.h>
#include <string.h>

int64_t tr_dist_buffer_bytes(int64_t total_bytes, int64_t bucket_bytes, int nccl)
{
    if (nccl || total_bytes <= 0) return 0;
    int64_t cap = bucket_bytes / 4, total = total_bytes / 4;
    if (cap < 1) cap = 1;
    if (cap > TR_DIST_MAX_MSG_BYTES / 4) cap = TR_DIST_MAX_MSG_BYTES / 4;
    if (cap > total) cap = total;
    int64_t chunks = (total + cap - 1) / cap;
    return (chunks > 1 ? 2 : 1) * cap * 4;
}

#ifdef TR_HAVE_MPI
/* ---------------------------------------------------------------- gradient spans */
/* The gradients are one stream of floats, last tensor first; a span is a piece of it. */
typedef struct span_cursor {
    int i;       /* tensor index, counting down */
    int64_t off; /* element offset inside grads[i] */
} span_cursor;

/* Copies len floats between the stream at *c and buf (pack: stream -> buf; else buf * scale
 * -> stream), advancing *c. */
static void copy_span(tr_tensor *const *grads, span_cursor *c, float *buf, int64_t len, int pack, float scale)
{
    int64_t j = 0;
    while (j < len && c->i >= 0) {
        tr_tensor *g = grads[c->i];
        int64_t take = g->numel - c->off;
        if (take > len - j) take = len - j;
        float *p = (float *)g->data + c->off;
        if (pack) {
            memcpy(buf + j, p, (size_t)take * sizeof(float));
        } else {
            for (int64_t k = 0; k < take; k++) p[k] = buf[j + k] * scale;
        }
        j += take;
        c->off += take;
        if (c->off == g->numel) {
            c->i--;
            c->off = 0;
        }
    }
}

/* ---------------------------------------------------------------- gradients */
/* The bucket buffers for buckets of cap floats: one when a single bucket holds every
 * gradient, else two (one in flight while the next is packed). */
static int ensure_buckets(tr_dist *d, tr_ctx *ctx, int64_t cap, int need)
{
    if (d->bucket_floats != cap) {
        for (int k = 0; k < 2; k++) {
            tr_tensor_free(d->bucket[k]);
            d->bucket[k] = NULL;
        }
        d->bucket_floats = cap;
    }
    for (int k = 0; k < need; k++) {
        if (d->bucket[k]) continue;
        d->bucket[k] = tr_tensor_new(ctx, 1, &cap, TR_F32, TR_CPU, TR_TAG_WORKSPACE);
        if (!d->bucket[k]) return tr_ctx_err(ctx)->status;
    }
    d->stats.buffer_bytes = (d->bucket[0] ? cap * 4 : 0) + (d->bucket[1] ? cap * 4 : 0);
    return 0;
}

/* CUDA gradients without NCCL: each tensor through host memory, one at a time. */
static int allreduce_staged(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        tr_tensor *g = grads[i];
        size_t nb = tr_tensor_nbytes(g);
        float *h = malloc(nb ? nb : 1);
        if (!h) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory staging %zu bytes", nb);
        int st = tr_tensor_read(ctx, g, h, nb) != 0 ? tr_ctx_err(ctx)->status : 0;
        for (int64_t off = 0; off < g->numel && st == 0; off += TR_DIST_MAX_MSG_BYTES / 4) {
            int64_t len = g->numel - off < TR_DIST_MAX_MSG_BYTES / 4 ? g->numel - off : TR_DIST_MAX_MSG_BYTES / 4;
            MPI_Request req = MPI_REQUEST_NULL;
            int rc = MPI_Iallreduce(MPI_IN_PLACE, h + off, (int)len, MPI_FLOAT, MPI_SUM, d->comm, &req);
            st = rc != MPI_SUCCESS ? tr_dist_mpi_fail(ctx, "MPI_Iallreduce", rc)
                                   : tr_dist_mpi_wait(d, ctx, &req, "the all-reduce of the gradients");
            d->stats.buckets++;
        }
        float inv = 1.0f / (float)d->size;
        for (int64_t k = 0; k < g->numel && st == 0; k++) h[k] *= inv;
        if (st == 0 && tr_tensor_write(ctx, g, h, nb) != 0) st = tr_ctx_err(ctx)->status;
        free(h);
        if (st) return st;
    }
    return 0;
}
#endif

int tr_dist_allreduce_grads(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n, int64_t bucket_bytes)
{
    /* one rank: nothing to average, unless NCCL is on (a GPU check runs its path alone) */
    if (n <= 0 || (d->size == 1 && !d->nccl)) return 0;
    int64_t total = 0;
    int on_cuda = 0;
    for (int i = 0; i < n; i++) {
        if (!grads[i] || grads[i]->dtype != TR_F32) {
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "distributed: gradient %d is %s; the all-reduce takes f32 gradients (the optimizer's)", i,
                           grads[i] ? tr_dtype_name(grads[i]->dtype) : "missing");
        }
        if (grads[i]->device != TR_CPU) on_cuda = 1;
        total += grads[i]->numel;
    }
    double t0 = tr_dist_now();
    int st = 0;
    if (on_cuda && d->nccl) {
        st = tr_dist_nccl_allreduce(d, ctx, grads, n, bucket_bytes);
        goto done;
    }
#ifdef TR_HAVE_MPI
    if (on_cuda) {
        st = allreduce_staged(d, ctx, grads, n);
        goto done;
    }
    int64_t cap = bucket_bytes / 4;
    if (cap < 1) cap = 1;
    if (cap > TR_DIST_MAX_MSG_BYTES / 4) cap = TR_DIST_MAX_MSG_BYTES / 4;
    if (cap > total) cap = total;
    int64_t chunks = (total + cap - 1) / cap;
    if ((st = ensure_buckets(d, ctx, cap, chunks > 1 ? 2 : 1)) != 0) goto done;
    {
        /* bucket k goes through buffer k % 2: before packing bucket k, bucket k - 2 (the
         * buffer's last one) is waited for and unpacked */
        MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        span_cursor start[2] = {{0, 0}, {0, 0}};
        int64_t len[2] = {0, 0};
        span_cursor pack = {n - 1, 0};
        float inv = 1.0f / (float)d->size;
        for (int64_t k = 0; k < chunks + 2 && st == 0; k++) {
            int s = (int)(k % 2);
            if (k >= 2) {
                st = tr_dist_mpi_wait(d, ctx, &req[s], "the all-reduce of the gradients");
                if (st) break;
                copy_span(grads, &start[s], d->bucket[s]->data, len[s], 0, inv);
            }
            if (k >= chunks) continue;
            start[s] = pack;
            len[s] = total - k * cap < cap ? total - k * cap : cap;
            copy_span(grads, &pack, d->bucket[s]->data, len[s], 1, 1.0f);
            int rc =
                MPI_Iallreduce(MPI_IN_PLACE, d->bucket[s]->data, (int)len[s], MPI_FLOAT, MPI_SUM, d->comm, &req[s]);
            if (rc != MPI_SUCCESS) st = tr_dist_mpi_fail(ctx, "MPI_Iallreduce", rc);
            d->stats.buckets++;
        }
    }
#else
    (void)bucket_bytes;
    (void)total;
#endif
done:
    d->stats.allreduce_seconds += tr_dist_now() - t0;
    d->stats.allreduce_bytes += total * 4;
    d->stats.allreduce_calls++;
    return st;
}
