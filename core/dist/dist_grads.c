/* dist_grads.c — the bucketed gradient all-reduce (dist.h: tr_dist_grads_begin / _ready /
 * _finish, and tr_dist_allreduce_grads = begin + finish) and the size of its bucket buffers.
 * The gradients are one stream of floats, last tensor first (the order in which backward
 * completes them), cut into buckets of bucket_bytes. As in PyTorch DDP a bucket is issued as
 * soon as backward has made all its floats final (tr_dist_grads_ready, called after each
 * encoder layer's backward on the step's last micro-batch), so the reduction of the last
 * layers runs while the first ones are still back-propagated.
 *   CPU tensors (MPI): bucket k is packed into host buffer k % 2 (tag workspace) and reduced
 *     with MPI_Iallreduce; before a buffer is used again its last bucket is waited for and
 *     unpacked, divided by the world size. At most two buckets are in flight, so the buffers
 *     stay two buckets whatever the model's size. Every call tests the requests in flight
 *     (Open MPI progresses a non-blocking collective only inside MPI calls).
 *   CUDA tensors: NCCL when it is on (dist_nccl.c: whole tensors, on its own stream), else
 *     each tensor through host memory at finish.
 * The buckets, their order and their contents do not depend on when they are issued, so the
 * result is the same bits with or without the overlap. Every wait is bounded by the job's
 * timeout (tr_dist_mpi_wait). */
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
/* Copies len floats between the stream at *c and buf (pack: stream -> buf; else buf * scale
 * -> stream), advancing *c. */
static void copy_span(tr_tensor *const *grads, tr_dist_cursor *c, float *buf, int64_t len, int pack, float scale)
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

/* ---------------------------------------------------------------- the MPI buckets */
/* Waits for the oldest bucket in flight and unpacks it (the mean over ranks). */
static int mpi_complete_oldest(tr_dist *d, tr_ctx *ctx)
{
    tr_dist_pending *p = &d->pending;
    int s = (int)(p->done % 2);
    int st = tr_dist_mpi_wait(d, ctx, &p->req[s], "the all-reduce of the gradients");
    if (st) return st;
    copy_span(p->grads, &p->start[s], d->bucket[s]->data, p->len[s], 0, 1.0f / (float)d->size);
    p->done++;
    return 0;
}

/* Issues the next bucket (its buffer's previous bucket is completed first). */
static int mpi_issue_next(tr_dist *d, tr_ctx *ctx)
{
    tr_dist_pending *p = &d->pending;
    int64_t k = p->issued;
    int s = (int)(k % 2);
    if (k - p->done >= 2) {
        int st = mpi_complete_oldest(d, ctx);
        if (st) return st;
    }
    p->start[s] = p->pack;
    p->len[s] = p->total - k * p->cap < p->cap ? p->total - k * p->cap : p->cap;
    copy_span(p->grads, &p->pack, d->bucket[s]->data, p->len[s], 1, 1.0f);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, d->bucket[s]->data, (int)p->len[s], MPI_FLOAT, MPI_SUM, d->comm, &p->req[s]);
    if (rc != MPI_SUCCESS) return tr_dist_mpi_fail(ctx, "MPI_Iallreduce", rc);
    p->issued++;
    d->stats.buckets++;
    return 0;
}

/* Lets the buckets in flight progress (a test, no wait). */
static int mpi_progress(tr_dist *d, tr_ctx *ctx)
{
    tr_dist_pending *p = &d->pending;
    for (int64_t k = p->done; k < p->issued; k++) {
        int flag = 0;
        int rc = MPI_Test(&p->req[k % 2], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return tr_dist_mpi_fail(ctx, "MPI_Test", rc);
    }
    return 0;
}
#endif

/* ---------------------------------------------------------------- begin, ready, finish */
void tr_dist_pending_release(tr_dist *d)
{
    free(d->pending.grads);
    memset(&d->pending, 0, sizeof d->pending);
}

/* Here rather than in dist_mpi.c: the job ends from the top down (the step's pending
 * all-reduce, NCCL, the buckets, then MPI), and the files below never call up. */
void tr_dist_free(tr_dist *d)
{
    if (!d) return;
    tr_dist_pending_release(d);
    tr_dist_nccl_release(d);
    for (int k = 0; k < 2; k++) tr_tensor_free(d->bucket[k]);
    tr_dist_mpi_end(d);
}

int tr_dist_grads_begin(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n, int64_t bucket_bytes)
{
    if (d->pending.active) {
        /* a step that failed between begin and finish: its buckets are drained first */
        int st = tr_dist_grads_finish(d, ctx);
        if (st) return st;
    }
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
    tr_dist_pending *p = &d->pending;
    p->grads = malloc((size_t)n * sizeof *p->grads);
    if (!p->grads) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory for %d gradients", n);
    memcpy(p->grads, grads, (size_t)n * sizeof *p->grads);
    p->n = n;
    p->total = total;
    p->bucket_bytes = bucket_bytes;
    p->next_nccl = n - 1;
    p->mode = on_cuda ? (d->nccl ? TR_DIST_NCCL : TR_DIST_STAGED) : TR_DIST_MPI_BUCKETS;
    p->active = 1;
#ifdef TR_HAVE_MPI
    p->req[0] = p->req[1] = MPI_REQUEST_NULL;
    if (p->mode == TR_DIST_MPI_BUCKETS) {
        int64_t cap = bucket_bytes / 4;
        if (cap < 1) cap = 1;
        if (cap > TR_DIST_MAX_MSG_BYTES / 4) cap = TR_DIST_MAX_MSG_BYTES / 4;
        if (cap > total) cap = total;
        p->cap = cap;
        p->chunks = (total + cap - 1) / cap;
        p->pack = (tr_dist_cursor){n - 1, 0};
        int st = ensure_buckets(d, ctx, cap, p->chunks > 1 ? 2 : 1);
        if (st) {
            tr_dist_pending_release(d);
            return st;
        }
    }
#else
    if (p->mode == TR_DIST_MPI_BUCKETS) {
        tr_dist_pending_release(d);
        return 0;
    }
#endif
    return 0;
}

int tr_dist_grads_ready(tr_dist *d, tr_ctx *ctx, int first_final)
{
    tr_dist_pending *p = &d->pending;
    if (!p->active) return 0;
    if (first_final < 0) first_final = 0;
    double t0 = tr_dist_now();
    int st = 0;
    if (p->mode == TR_DIST_NCCL && first_final <= p->next_nccl) {
        int64_t nb = 0;
        st = tr_dist_nccl_issue(d, ctx, p->grads, first_final, p->next_nccl + 1, p->bucket_bytes, &nb);
        p->next_nccl = first_final - 1;
        d->stats.buckets += nb;
        d->stats.buckets_overlapped += nb;
    }
#ifdef TR_HAVE_MPI
    if (p->mode == TR_DIST_MPI_BUCKETS) {
        int64_t final_floats = 0;
        for (int i = first_final; i < p->n; i++) final_floats += p->grads[i]->numel;
        st = mpi_progress(d, ctx);
        /* bucket k is final when its last float is: (k + 1) * cap, or the end of the stream */
        while (st == 0 && p->issued < p->chunks &&
               ((p->issued + 1) * p->cap <= final_floats || final_floats == p->total)) {
            st = mpi_issue_next(d, ctx);
            if (st == 0) d->stats.buckets_overlapped++;
        }
    }
#endif
    d->stats.allreduce_seconds += tr_dist_now() - t0;
    return st;
}

int tr_dist_grads_finish(tr_dist *d, tr_ctx *ctx)
{
    tr_dist_pending *p = &d->pending;
    if (!p->active) return 0;
    double t0 = tr_dist_now();
    int st = 0;
    if (p->mode == TR_DIST_NCCL) {
        int64_t nb = 0;
        st = tr_dist_nccl_issue(d, ctx, p->grads, 0, p->next_nccl + 1, p->bucket_bytes, &nb);
        d->stats.buckets += nb;
        if (st == 0) st = tr_dist_nccl_wait(d, ctx);
    }
#ifdef TR_HAVE_MPI
    if (p->mode == TR_DIST_STAGED) st = allreduce_staged(d, ctx, p->grads, p->n);
    if (p->mode == TR_DIST_MPI_BUCKETS) {
        while (st == 0 && p->issued < p->chunks) st = mpi_issue_next(d, ctx);
        while (st == 0 && p->done < p->issued) st = mpi_complete_oldest(d, ctx);
    }
#endif
    d->stats.allreduce_seconds += tr_dist_now() - t0;
    d->stats.allreduce_bytes += p->total * 4;
    d->stats.allreduce_calls++;
    tr_dist_pending_release(d);
    return st;
}

int tr_dist_allreduce_grads(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n, int64_t bucket_bytes)
{
    int st = tr_dist_grads_begin(d, ctx, grads, n, bucket_bytes);
    return st ? st : tr_dist_grads_finish(d, ctx);
}
