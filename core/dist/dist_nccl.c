/* dist_nccl.c — the gradient all-reduce of CUDA tensors over NCCL (dist.h), in builds with
 * the CUDA backend (TR_HAVE_NCCL: nccl.h found beside the CUDA toolkit).
 *
 * libnccl is loaded with dlopen when a run asks for it, not linked: the binary (and the GPU
 * bundle) starts on machines without NCCL, and the message says what to install when a run
 * needs it. The NCCL unique id is made by rank 0 and broadcast over MPI (a world of one
 * makes its own, so one rank on one GPU needs no mpirun).
 *
 * The set-up is agreed: the ranks learn over MPI whether every one of them loaded libnccl,
 * whether rank 0 made the id (it is broadcast with that flag) and whether every communicator
 * came up, and all of them switch to NCCL or none does. So a rank that cannot load libnccl
 * makes every rank of an "auto" run fall back to MPI together, instead of going on alone
 * while the others wait for an id it never sends.
 *
 * Streams: the reduction runs on a stream of its own. Each issue waits for an event recorded
 * on the device's compute stream (the gradients it reduces are final: issued while backward
 * goes on, dist_grads.c), each bucket is one ncclGroupStart/End of
 * in-place ncclAvg all-reduces, and the compute stream waits for the reduction's event
 * before the optimizer step. The host polls that event with the timeout, and the
 * communicator's asynchronous error beside it (what NCCL reports of a rank that exited or
 * aborted, as its documentation asks callers to poll): a rank that never joins or fails makes
 * the others stop (ncclCommAbort), never hang, and a failed all-reduce is never taken for a
 * finished one. After an abort the state has no communicator and every later call says so. */
#include "dist_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TR_HAVE_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include "cuda_device.h"
#include "cuda_sync.h"

typedef struct nccl_api {
    void *lib;
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t *);
    const char *(*error_string)(ncclResult_t);
    const char *(*last_error)(ncclComm_t); /* NCCL 2.13 and newer; NULL before */
} nccl_api;

typedef struct nccl_state {
    nccl_api api;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready, done;
    int device;
} nccl_state;

static int cuda_fail(tr_ctx *ctx, const char *call, cudaError_t e)
{
    return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed (NCCL): %s failed: %s", call, cudaGetErrorString(e));
}

/* NCCL's text for r, and its last error's message where the library has one */
static void nccl_describe(const nccl_state *s, ncclResult_t r, char *out, size_t size)
{
    const char *last = s->api.last_error ? s->api.last_error(s->comm) : NULL;
    snprintf(out, size, "%s%s%s", s->api.error_string ? s->api.error_string(r) : "unknown NCCL error",
             last && *last ? ": " : "", last && *last ? last : "");
}

static int nccl_fail(tr_ctx *ctx, const nccl_state *s, const char *call, ncclResult_t r)
{
    char why[1200];
    nccl_describe(s, r, why, sizeof why);
    return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed (NCCL): %s failed: %s", call, why);
}

/* The communicator cannot be trusted any more: abort it (its collectives in flight end, the
 * other ranks' waits too) and forget it. */
static void abort_comm(nccl_state *s)
{
    if (s->comm) (void)s->api.comm_abort(s->comm); /* what it returns changes nothing: the run stops */
    s->comm = NULL;
}

#define CUDA_TRY(ctx, call)                                                                                            \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cuda_fail(ctx, #call, e_);                                                       \
    } while (0)
#define NCCL_TRY(ctx, s, call)                                                                                         \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) return nccl_fail(ctx, s, #call, r_);                                                    \
    } while (0)

static int load_api(tr_ctx *ctx, nccl_api *a)
{
    a->lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) a->lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "distributed.backend = \"nccl\": cannot load libnccl.so.2 (%s). Install NCCL (Debian: "
                       "apt-get install libnccl2; it also comes with the CUDA toolkit's lib64), or set "
                       "distributed.backend = \"mpi\".",
                       dlerror());
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&a->get_unique_id, "ncclGetUniqueId"},
        {(void **)&a->comm_init_rank, "ncclCommInitRank"},
        {(void **)&a->all_reduce, "ncclAllReduce"},
        {(void **)&a->group_start, "ncclGroupStart"},
        {(void **)&a->group_end, "ncclGroupEnd"},
        {(void **)&a->comm_destroy, "ncclCommDestroy"},
        {(void **)&a->comm_abort, "ncclCommAbort"},
        {(void **)&a->error_string, "ncclGetErrorString"},
        {(void **)&a->comm_get_async_error, "ncclCommGetAsyncError"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(a->lib, syms[i].name);
        if (!*syms[i].slot) {
            dlclose(a->lib);
            a->lib = NULL;
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "distributed.backend = \"nccl\": the libnccl found lacks %s (NCCL 2.10 or newer is needed)",
                           syms[i].name);
        }
    }
    void *last = dlsym(a->lib, "ncclGetLastError");
    memcpy(&a->last_error, &last, sizeof last);
    return 0;
}

/* Whether every rank succeeded at a step of the set-up (mine_failed: this one did not): 0,
 * or the error, TR_EUSER naming how many ranks failed (this rank's own error stays when it
 * is one of them). */
static int agree(tr_dist *d, tr_ctx *ctx, int mine_failed, const char *step)
{
    if (d->size == 1) return mine_failed ? tr_ctx_err(ctx)->status : 0;
    /* this rank's own message, kept: the sum below overwrites ctx's error when it fails */
    int st = mine_failed ? tr_ctx_err(ctx)->status : 0;
    double failed = mine_failed ? 1.0 : 0.0;
    int rc = tr_dist_allreduce_sum_f64(d, ctx, &failed, 1, step);
    if (rc) return rc;
    if (st) return st;
    if (failed > 0) {
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "distributed (NCCL): %s failed on %g of %d ranks (their messages say why), so no rank uses "
                       "NCCL",
                       step, failed, d->size);
    }
    return 0;
}

/* The unique id from rank 0 to every rank, over MPI, with whether rank 0 made it (a world of
 * one: its own). */
static int share_id(tr_dist *d, tr_ctx *ctx, nccl_state *s, ncclUniqueId *id)
{
    unsigned char msg[1 + sizeof *id];
    memset(msg, 0, sizeof msg);
    int st = 0;
    if (d->rank == 0) {
        ncclResult_t r = s->api.get_unique_id(id);
        if (r == ncclSuccess) {
            msg[0] = 1;
            memcpy(msg + 1, id, sizeof *id);
        } else {
            st = nccl_fail(ctx, s, "ncclGetUniqueId", r);
        }
    }
    if (d->size == 1) return st;
    /* on rank 0 a failed broadcast overwrites ctx's error with its own, the one that matters */
    int rc = tr_dist_bcast_bytes(d, ctx, msg, sizeof msg, 0);
    if (rc) return rc;
    if (st) return st;
    if (!msg[0]) {
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "distributed (NCCL): rank 0 could not make the NCCL unique id (its message says why), so no "
                       "rank uses NCCL");
    }
    memcpy(id, msg + 1, sizeof *id);
    return 0;
}

int tr_dist_have_nccl(void)
{
    return 1;
}

/* This rank's communicator, stream and events; 0 or the error. */
static int open_comm(tr_dist *d, tr_ctx *ctx, nccl_state *s, const ncclUniqueId *id)
{
    CUDA_TRY(ctx, cudaSetDevice(s->device));
    ncclResult_t r = s->api.comm_init_rank(&s->comm, d->size, *id, d->rank);
    if (r != ncclSuccess) {
        s->comm = NULL;
        return nccl_fail(ctx, s, "ncclCommInitRank", r);
    }
    CUDA_TRY(ctx, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CUDA_TRY(ctx, cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    CUDA_TRY(ctx, cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
    return 0;
}

int tr_dist_use_nccl(tr_dist *d, tr_ctx *ctx, int device)
{
    if (d->nccl) return 0;
    nccl_state *s = calloc(1, sizeof *s);
    if (!s) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory for the NCCL state");
    s->device = device;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    /* every step is agreed, so that every rank gets here and leaves the same way */
    int st = agree(d, ctx, load_api(ctx, &s->api) != 0, "loading libnccl");
    if (st == 0) st = share_id(d, ctx, s, &id);
    if (st == 0) st = agree(d, ctx, open_comm(d, ctx, s, &id) != 0, "setting up the NCCL communicator");
    d->nccl = s;
    if (st) tr_dist_nccl_release(d);
    return st;
}

void tr_dist_nccl_release(tr_dist *d)
{
    nccl_state *s = d->nccl;
    if (!s) return;
    /* teardown: errors have no one left to tell */
    if (s->done) (void)cudaEventDestroy(s->done);
    if (s->ready) (void)cudaEventDestroy(s->ready);
    if (s->stream) (void)cudaStreamDestroy(s->stream);
    if (s->comm) (void)s->api.comm_destroy(s->comm);
    if (s->api.lib) dlclose(s->api.lib);
    free(s);
    d->nccl = NULL;
}

/* Makes the run's device current and gives its compute stream, which the collectives' stream
 * waits for and is waited by; fails once the communicator was aborted after a failure. */
static int enter_run_device(tr_ctx *ctx, nccl_state *s, cudaStream_t *compute)
{
    if (!s->comm) {
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "distributed (NCCL): the communicator was aborted after an earlier failure (above); the run "
                       "cannot go on");
    }
    void *dev = tr_ctx_cuda_state(ctx, s->device);
    if (!dev) return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed (NCCL): cuda:%d has no state", s->device);
    *compute = (cudaStream_t)tr_cuda_stream(dev);
    CUDA_TRY(ctx, cudaSetDevice(s->device));
    return 0;
}

int tr_dist_nccl_issue(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int lo, int hi, int64_t bucket_bytes,
                       int64_t *buckets)
{
    nccl_state *s = d->nccl;
    *buckets = 0;
    if (hi <= lo) return 0;
    cudaStream_t compute;
    int rc = enter_run_device(ctx, s, &compute);
    if (rc) return rc;
    /* the NCCL stream waits for the backward work enqueued so far (these gradients' last writes) */
    CUDA_TRY(ctx, cudaEventRecord(s->ready, compute));
    CUDA_TRY(ctx, cudaStreamWaitEvent(s->stream, s->ready, 0));
    int i = hi - 1;
    while (i >= lo) {
        int64_t bytes = 0;
        NCCL_TRY(ctx, s, s->api.group_start());
        /* one bucket: whole tensors, last first, until bucket_bytes (at least one tensor) */
        while (i >= lo && (bytes == 0 || bytes + grads[i]->numel * 4 <= bucket_bytes)) {
            tr_tensor *g = grads[i];
            if (g->device != s->device) {
                (void)s->api.group_end();
                return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                               "distributed (NCCL): a gradient is on %s%d, the run on cuda:%d",
                               g->device < 0 ? "cpu" : "cuda:", g->device < 0 ? 0 : g->device, s->device);
            }
            ncclResult_t r =
                s->api.all_reduce(g->data, g->data, (size_t)g->numel, ncclFloat, ncclAvg, s->comm, s->stream);
            if (r != ncclSuccess) {
                (void)s->api.group_end();
                return nccl_fail(ctx, s, "ncclAllReduce", r);
            }
            bytes += g->numel * 4;
            i--;
        }
        NCCL_TRY(ctx, s, s->api.group_end());
        (*buckets)++;
    }
    return 0;
}

int tr_dist_nccl_wait(tr_dist *d, tr_ctx *ctx)
{
    nccl_state *s = d->nccl;
    cudaStream_t compute;
    int rc = enter_run_device(ctx, s, &compute);
    if (rc) return rc;
    CUDA_TRY(ctx, cudaEventRecord(s->done, s->stream));
    CUDA_TRY(ctx, cudaStreamWaitEvent(compute, s->done, 0));
    double deadline = tr_dist_now() + d->timeout_s;
    tr_host_sync_note(TR_HOST_SYNC_EVENT); /* the poll below is one host wait */
    for (;;) {
        cudaError_t e = cudaEventQuery(s->done);
        /* after the query: a failure that ended the collective is seen with its completion */
        ncclResult_t async = ncclSuccess, r = s->api.comm_get_async_error(s->comm, &async);
        if (r != ncclSuccess) async = r;
        if (async != ncclSuccess && async != ncclInProgress) {
            char why[1200];
            nccl_describe(s, async, why, sizeof why);
            abort_comm(s);
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "distributed: the NCCL all-reduce of the gradients failed on rank %d of %d: %s. The run "
                           "stops on every rank; look above for the other ranks' messages.",
                           d->rank, d->size, why);
        }
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) {
            abort_comm(s);
            return cuda_fail(ctx, "cudaEventQuery (the NCCL all-reduce)", e);
        }
        if (tr_dist_now() > deadline) {
            abort_comm(s);
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "distributed: the NCCL all-reduce of the gradients did not complete within %g s on rank %d "
                           "of %d: a rank has died or hangs. The run stops on every rank; raise distributed.timeout "
                           "when a rank is only slow.",
                           d->timeout_s, d->rank, d->size);
        }
    }
}

#else /* no NCCL in this build */

int tr_dist_have_nccl(void)
{
    return 0;
}

int tr_dist_use_nccl(tr_dist *d, tr_ctx *ctx, int device)
{
    (void)d;
    (void)device;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "distributed.backend = \"nccl\": this build has no CUDA backend, so no NCCL. Rebuild with nvcc "
                   "installed (make), or set distributed.backend = \"mpi\".");
}

void tr_dist_nccl_release(tr_dist *d)
{
    (void)d;
}

int tr_dist_nccl_issue(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int lo, int hi, int64_t bucket_bytes,
                       int64_t *buckets)
{
    (void)d;
    (void)grads;
    (void)lo;
    (void)hi;
    (void)bucket_bytes;
    *buckets = 0;
    return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed: NCCL all-reduce in a build without NCCL");
}

int tr_dist_nccl_wait(tr_dist *d, tr_ctx *ctx)
{
    (void)d;
    return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed: NCCL all-reduce in a build without NCCL");
}

#endif
