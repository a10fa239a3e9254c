/* dist_nccl.c — the gradient all-reduce of CUDA tensors over NCCL (dist.h), in builds with
 * the CUDA backend (TR_HAVE_NCCL: nccl.h found beside the CUDA toolkit).
 *
 * libnccl is loaded with dlopen when a run asks for it, not linked: the binary (and the GPU
 * bundle) starts on machines without NCCL, and the message says what to install when a run
 * needs it. The NCCL unique id is made by rank 0 and broadcast over MPI (a world of one
 * makes its own, so one rank on one GPU needs no mpirun).
 *
 * Streams: the reduction runs on a stream of its own. Each issue waits for an event recorded
 * on the device's compute stream (the gradients it reduces are final: issued while backward
 * goes on, dist_grads.c), each bucket is one ncclGroupStart/End of
 * in-place ncclAvg all-reduces, and the compute stream waits for the reduction's event
 * before the optimizer step. The host polls that event with the timeout: a rank that never
 * joins makes the others stop (ncclCommAbort), never hang. */
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
    const char *(*error_string)(ncclResult_t);
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

static int nccl_fail(tr_ctx *ctx, const nccl_state *s, const char *call, ncclResult_t r)
{
    return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed (NCCL): %s failed: %s", call,
                   s->api.error_string ? s->api.error_string(r) : "unknown NCCL error");
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
        {(void **)&a->get_unique_id, "ncclGetUniqueId"}, {(void **)&a->comm_init_rank, "ncclCommInitRank"},
        {(void **)&a->all_reduce, "ncclAllReduce"},      {(void **)&a->group_start, "ncclGroupStart"},
        {(void **)&a->group_end, "ncclGroupEnd"},        {(void **)&a->comm_destroy, "ncclCommDestroy"},
        {(void **)&a->comm_abort, "ncclCommAbort"},      {(void **)&a->error_string, "ncclGetErrorString"},
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
    return 0;
}

/* The unique id from rank 0 to every rank, over MPI (a world of one: its own). */
static int share_id(tr_dist *d, tr_ctx *ctx, nccl_state *s, ncclUniqueId *id)
{
    if (d->rank == 0) NCCL_TRY(ctx, s, s->api.get_unique_id(id));
    if (d->size == 1) return 0;
    return tr_dist_bcast_bytes(d, ctx, id, sizeof *id, 0);
}

int tr_dist_have_nccl(void)
{
    return 1;
}

int tr_dist_use_nccl(tr_dist *d, tr_ctx *ctx, int device)
{
    if (d->nccl) return 0;
    nccl_state *s = calloc(1, sizeof *s);
    if (!s) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory for the NCCL state");
    s->device = device;
    int st = load_api(ctx, &s->api);
    if (st) {
        free(s);
        return st;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if ((st = share_id(d, ctx, s, &id)) != 0) goto fail;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        st = cuda_fail(ctx, "cudaSetDevice", e);
        goto fail;
    }
    ncclResult_t r = s->api.comm_init_rank(&s->comm, d->size, id, d->rank);
    if (r != ncclSuccess) {
        st = nccl_fail(ctx, s, "ncclCommInitRank", r);
        s->comm = NULL;
        goto fail;
    }
    if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming)) != cudaSuccess) {
        st = cuda_fail(ctx, "creating the NCCL stream and events", e);
        goto fail;
    }
    d->nccl = s;
    return 0;
fail:
    d->nccl = s;
    tr_dist_nccl_release(d);
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

int tr_dist_nccl_issue(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int lo, int hi, int64_t bucket_bytes,
                       int64_t *buckets)
{
    nccl_state *s = d->nccl;
    *buckets = 0;
    if (hi <= lo) return 0;
    void *dev = tr_ctx_cuda_state(ctx, s->device);
    if (!dev) return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed (NCCL): cuda:%d has no state", s->device);
    cudaStream_t compute = (cudaStream_t)tr_cuda_stream(dev);
    CUDA_TRY(ctx, cudaSetDevice(s->device));
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
    void *dev = tr_ctx_cuda_state(ctx, s->device);
    if (!dev) return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed (NCCL): cuda:%d has no state", s->device);
    cudaStream_t compute = (cudaStream_t)tr_cuda_stream(dev);
    CUDA_TRY(ctx, cudaSetDevice(s->device));
    CUDA_TRY(ctx, cudaEventRecord(s->done, s->stream));
    CUDA_TRY(ctx, cudaStreamWaitEvent(compute, s->done, 0));
    double deadline = tr_dist_now() + d->timeout_s;
    tr_host_sync_note(TR_HOST_SYNC_EVENT);   /* the poll below is one host wait */
    for (;;) {
        cudaError_t e = cudaEventQuery(s->done);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) return cuda_fail(ctx, "cudaEventQuery (the NCCL all-reduce)", e);
        if (tr_dist_now() > deadline) {
            (void)s->api.comm_abort(s->comm);
            s->comm = NULL;
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
