/* batch_feed.c — double-buffered batch uploads on a copy stream (contract, events and
 * sync points in batch_feed.h).
 *
 * The CPU stand-in (device TR_CPU) is compiled in every build; the CUDA half only with
 * TR_HAVE_CUDA. tests/c/test_batch_feed.c compiles this file against
 * tests/c/fake_cuda_runtime.h (TR_BATCH_FEED_TEST_RUNTIME), whose copies wait in their
 * stream's queue until a sync point, so that a host buffer rewritten too early, or a
 * missing wait, shows up as wrong bytes on the CPU. */
#include "batch_feed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TR_HAVE_CUDA
#include "cuda_device.h"
#ifdef TR_BATCH_FEED_TEST_RUNTIME
#include TR_BATCH_FEED_TEST_RUNTIME
#else
#include <cuda_runtime.h>
#endif
#include "cuda_sync.h"
#endif

/* Buffers grow to the batch rounded up to a multiple of this many elements, so that the
 * batch lengths of a bucketed run settle on a few capacities. */
enum { FEED_ROUND = 4096 };

typedef enum slot_state {
    SLOT_IDLE = 0,      /* nothing queued reads it */
    SLOT_FILLING,       /* begin handed out its host buffer */
    SLOT_UPLOADED,      /* its upload is queued; the step's reads not yet marked released */
    SLOT_RELEASED       /* released recorded after the reads */
} slot_state;

typedef struct feed_slot {
    void *host;           /* n64 i64 values, then n32 i32 values */
    size_t host_bytes;
    int host_pinned;      /* cudaHostAlloc (1) or malloc (0) */
    tr_tensor *dev32, *dev64;
    int64_t n32, n64;     /* the batch in it */
    slot_state state;
#ifdef TR_HAVE_CUDA
    cudaEvent_t uploaded, released;
    int upload_queued;    /* uploaded is recorded and not yet waited for by the host */
    int release_recorded; /* released holds a record the next upload must wait for */
#endif
} feed_slot;

struct tr_batch_feed {
    tr_ctx *ctx;
    int device;
    int next;             /* the slot the next begin takes */
    int cur;              /* the slot of the last begin (-1 before the first) */
    feed_slot slot[2];
#ifdef TR_HAVE_CUDA
    cudaStream_t copy;    /* non-blocking, the feed's own */
    cudaStream_t compute; /* the device's compute stream (cuda_device.h) */
#endif
};

static int64_t round_up(int64_t n) { return n <= 0 ? 0 : (n + FEED_ROUND - 1) / FEED_ROUND * FEED_ROUND; }

static int64_t numel_of(const tr_tensor *t) { return t ? t->numel : 0; }

/* ------------------------------------------------------------ CUDA calls */

#ifdef TR_HAVE_CUDA

/* The error of a failed CUDA call: "FN on cuda:N: <message> (<name>; `stmt` at file:line)". */
static int feed_cuda_fail(tr_batch_feed *f, const char *fn, cudaError_t e, const char *stmt, int line)
{
    (void)cudaGetLastError();
    return tr_fail(tr_ctx_err(f->ctx), e == cudaErrorMemoryAllocation ? TR_EOOM : TR_EINTERNAL,
                   "%s on cuda:%d: %s (%s; `%s` at %s:%d). A launch failure or an illegal address here usually "
                   "comes from an earlier kernel on this device; rerun under compute-sanitizer to find it.",
                   fn, f->device, cudaGetErrorString(e), cudaGetErrorName(e), stmt, __FILE__, line);
}

/* Expression: TR_OK, or the status of the failed call (the context's error is set). */
#define FEED_CALL(f, fn, call) feed_check((f), (fn), (call), #call, __LINE__)

static int feed_check(tr_batch_feed *f, const char *fn, cudaError_t e, const char *stmt, int line)
{
    return e == cudaSuccess ? TR_OK : feed_cuda_fail(f, fn, e, stmt, line);
}

/* Makes the feed's device current; returns the caller's, to restore (-1: unknown). */
static int enter_device(tr_batch_feed *f)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        (void)cudaGetLastError();
        prev = -1;
    }
    if (prev != f->device) (void)cudaSetDevice(f->device);
    return prev;
}

static void leave_device(int prev)
{
    int cur = -1;
    if (prev >= 0 && cudaGetDevice(&cur) == cudaSuccess && cur != prev) (void)cudaSetDevice(prev);
    (void)cudaGetLastError();
}

#endif

/* ------------------------------------------------------------ buffers */

static void free_host(tr_batch_feed *f, feed_slot *s)
{
    (void)f;
    if (!s->host) return;
#ifdef TR_HAVE_CUDA
    if (s->host_pinned) {
        (void)cudaFreeHost(s->host);
        (void)cudaGetLastError();
    } else
#endif
        free(s->host);
    s->host = NULL;
    s->host_bytes = 0;
}

/* Pinned when the system allows it (the copy engine reads it directly), else malloc. */
static int alloc_host(tr_batch_feed *f, feed_slot *s, size_t bytes)
{
    s->host_pinned = 0;
#ifdef TR_HAVE_CUDA
    if (f->device != TR_CPU) {
        if (cudaHostAlloc(&s->host, bytes, cudaHostAllocPortable) == cudaSuccess) {
            s->host_pinned = 1;
            s->host_bytes = bytes;
            return TR_OK;
        }
        (void)cudaGetLastError();
        s->host = NULL;
    }
#endif
    s->host = malloc(bytes);
    if (!s->host)
        return tr_fail(tr_ctx_err(f->ctx), TR_EOOM, "tr_batch_feed_begin: out of host memory for a %zu-byte batch buffer",
                       bytes);
    s->host_bytes = bytes;
    return TR_OK;
}

/* A device buffer of at least n elements of dtype in *t (freed and made anew when too small:
 * views of the old one keep it alive). Sets *fresh when it made one. */
static int ensure_dev(tr_batch_feed *f, tr_tensor **t, int64_t n, int dtype, int *fresh)
{
    if (n <= numel_of(*t)) return TR_OK;
    int64_t cap = round_up(n);
    tr_tensor *nt = tr_tensor_new(f->ctx, 1, &cap, dtype, f->device, TR_TAG_ACTIVATIONS);
    if (!nt) return tr_ctx_err(f->ctx)->status;
    tr_tensor_free(*t);
    *t = nt;
    *fresh = 1;
    return TR_OK;
}

/* ------------------------------------------------------------ life */

tr_batch_feed *tr_batch_feed_new(tr_ctx *ctx, int device)
{
    if (!ctx) return NULL;
    tr_batch_feed *f = calloc(1, sizeof *f);
    if (!f) {
        tr_fail(tr_ctx_err(ctx), TR_EOOM, "tr_batch_feed_new: out of host memory");
        return NULL;
    }
    f->ctx = ctx;
    f->device = device;
    f->cur = -1;
    if (device == TR_CPU) return f;
#ifdef TR_HAVE_CUDA
    void *state = tr_ctx_cuda_state(ctx, device);
    if (!state) {
        free(f);
        return NULL;
    }
    f->compute = (cudaStream_t)tr_cuda_stream(state);
    int prev = enter_device(f);
    int rc = FEED_CALL(f, "tr_batch_feed_new", cudaStreamCreateWithFlags(&f->copy, cudaStreamNonBlocking));
    for (int b = 0; b < 2 && rc == TR_OK; b++) {
        rc = FEED_CALL(f, "tr_batch_feed_new", cudaEventCreateWithFlags(&f->slot[b].uploaded, cudaEventDisableTiming));
        if (rc == TR_OK)
            rc = FEED_CALL(f, "tr_batch_feed_new",
                           cudaEventCreateWithFlags(&f->slot[b].released, cudaEventDisableTiming));
    }
    leave_device(prev);
    if (rc != TR_OK) {
        tr_batch_feed_free(f);
        return NULL;
    }
    return f;
#else
    tr_fail(tr_ctx_err(ctx), TR_EUSER,
            "tr_batch_feed_new on cuda:%d: this build of trainer has no CUDA backend (nvcc was not found at build "
            "time, or it was built with CUDA=0); train on device \"cpu\", or rebuild with the CUDA toolkit installed",
            device);
    free(f);
    return NULL;
#endif
}

void tr_batch_feed_free(tr_batch_feed *f)
{
    if (!f) return;
#ifdef TR_HAVE_CUDA
    int prev = -1;
    if (f->device != TR_CPU) {
        prev = enter_device(f);
        /* no queued copy may still read a host buffer freed below */
        if (f->copy) (void)tr_sync_stream(f->copy);
    }
#endif
    for (int b = 0; b < 2; b++) {
        feed_slot *s = &f->slot[b];
        free_host(f, s);
        tr_tensor_free(s->dev32);
        tr_tensor_free(s->dev64);
#ifdef TR_HAVE_CUDA
        if (s->uploaded) (void)cudaEventDestroy(s->uploaded);
        if (s->released) (void)cudaEventDestroy(s->released);
#endif
    }
#ifdef TR_HAVE_CUDA
    if (f->copy) (void)cudaStreamDestroy(f->copy);
    if (f->device != TR_CPU) leave_device(prev);
#endif
    free(f);
}

/* ------------------------------------------------------------ a batch */

int tr_batch_feed_begin(tr_batch_feed *f, int64_t n32, int64_t n64, int32_t **host32, int64_t **host64)
{
    if (!f || !host32 || !host64) return TR_EUSER;
    if (n32 < 0 || n64 < 0)
        return tr_fail(tr_ctx_err(f->ctx), TR_EUSER, "tr_batch_feed_begin: negative counts (%lld i32, %lld i64)",
                       (long long)n32, (long long)n64);
    int b = f->next;
    feed_slot *s = &f->slot[b];
    int rc = TR_OK;
#ifdef TR_HAVE_CUDA
    int prev = f->device != TR_CPU ? enter_device(f) : -1;
    if (f->device != TR_CPU) {
        /* the upload that last read this host buffer must be done before it is rewritten */
        if (s->upload_queued) {
            rc = FEED_CALL(f, "tr_batch_feed_begin", tr_sync_feed_slot(s->uploaded));
            if (rc == TR_OK) s->upload_queued = 0;
        }
        /* uploaded and never released (the step failed): after everything queued so far */
        if (rc == TR_OK && s->state == SLOT_UPLOADED) {
            rc = FEED_CALL(f, "tr_batch_feed_begin", cudaEventRecord(s->released, f->compute));
            if (rc == TR_OK) s->release_recorded = 1;
        }
    }
#endif
    size_t need = (size_t)n64 * 8 + (size_t)n32 * 4;
    if (rc == TR_OK && need > s->host_bytes) {
        free_host(f, s);
        rc = alloc_host(f, s, (size_t)round_up(n64) * 8 + (size_t)round_up(n32) * 4);
    }
    int fresh = 0;
    if (rc == TR_OK) rc = ensure_dev(f, &s->dev32, n32 > 0 ? n32 : 1, TR_I32, &fresh);
    if (rc == TR_OK) rc = ensure_dev(f, &s->dev64, n64 > 0 ? n64 : 1, TR_I64, &fresh);
#ifdef TR_HAVE_CUDA
    /* a new block may be one the compute stream freed while its kernels still read it */
    if (rc == TR_OK && fresh && f->device != TR_CPU) {
        rc = FEED_CALL(f, "tr_batch_feed_begin", cudaEventRecord(s->released, f->compute));
        if (rc == TR_OK) s->release_recorded = 1;
    }
    if (f->device != TR_CPU) leave_device(prev);
#endif
    if (rc != TR_OK) return rc;
    s->n32 = n32;
    s->n64 = n64;
    s->state = SLOT_FILLING;
    f->cur = b;
    f->next = 1 - b;
    *host64 = n64 > 0 ? (int64_t *)s->host : NULL;
    *host32 = n32 > 0 ? (int32_t *)((char *)s->host + (size_t)n64 * 8) : NULL;
    return TR_OK;
}

int tr_batch_feed_upload(tr_batch_feed *f, tr_tensor **dev32, tr_tensor **dev64)
{
    if (!f || !dev32 || !dev64) return TR_EUSER;
    if (f->cur < 0 || f->slot[f->cur].state != SLOT_FILLING)
        return tr_fail(tr_ctx_err(f->ctx), TR_EUSER,
                       "tr_batch_feed_upload: no batch to upload (call tr_batch_feed_begin and fill it first)");
    feed_slot *s = &f->slot[f->cur];
    const char *h64 = s->host, *h32 = (const char *)s->host + (size_t)s->n64 * 8;
    int rc = TR_OK;
    if (f->device == TR_CPU) {
        if (s->n32) memcpy(s->dev32->data, h32, (size_t)s->n32 * 4);
        if (s->n64) memcpy(s->dev64->data, h64, (size_t)s->n64 * 8);
    }
#ifdef TR_HAVE_CUDA
    else {
        const char *fn = "tr_batch_feed_upload";
        int prev = enter_device(f);
        /* copy stream: after the compute stream's last reads of this slot, the copies, then
         * the record; compute stream: its next kernels after the record (no host wait) */
        if (s->release_recorded) rc = FEED_CALL(f, fn, cudaStreamWaitEvent(f->copy, s->released, 0));
        if (rc == TR_OK && s->n32)
            rc = FEED_CALL(f, fn, cudaMemcpyAsync(s->dev32->data, h32, (size_t)s->n32 * 4, cudaMemcpyHostToDevice,
                                                  f->copy));
        if (rc == TR_OK && s->n64)
            rc = FEED_CALL(f, fn, cudaMemcpyAsync(s->dev64->data, h64, (size_t)s->n64 * 8, cudaMemcpyHostToDevice,
                                                  f->copy));
        if (rc == TR_OK) rc = FEED_CALL(f, fn, cudaEventRecord(s->uploaded, f->copy));
        if (rc == TR_OK) {
            s->upload_queued = 1;
            rc = FEED_CALL(f, fn, cudaStreamWaitEvent(f->compute, s->uploaded, 0));
        }
        if (rc != TR_OK) {
            /* nothing queued may read the host buffer after a failure: drain the copy stream
             * (the slot is taken again by the next begin, which rewrites it) */
            (void)tr_sync_stream(f->copy);
            (void)cudaGetLastError();
            s->upload_queued = 0;
            s->state = SLOT_IDLE;
        }
        leave_device(prev);
    }
#endif
    if (rc != TR_OK) return rc;
    s->state = SLOT_UPLOADED;
    *dev32 = s->dev32;
    *dev64 = s->dev64;
    return TR_OK;
}

int tr_batch_feed_release(tr_batch_feed *f)
{
    if (!f) return TR_EUSER;
    if (f->cur < 0 || f->slot[f->cur].state != SLOT_UPLOADED) return TR_OK;   /* nothing uploaded: nothing to mark */
    feed_slot *s = &f->slot[f->cur];
    int rc = TR_OK;
#ifdef TR_HAVE_CUDA
    if (f->device != TR_CPU) {
        int prev = enter_device(f);
        rc = FEED_CALL(f, "tr_batch_feed_release", cudaEventRecord(s->released, f->compute));
        if (rc == TR_OK) s->release_recorded = 1;
        leave_device(prev);
    }
#endif
    if (rc == TR_OK) s->state = SLOT_RELEASED;
    return rc;
}

int tr_batch_feed_slot(const tr_batch_feed *f) { return f ? f->cur : -1; }

int tr_batch_feed_pinned(const tr_batch_feed *f)
{
    if (!f || f->cur < 0) return 0;
    return f->slot[f->cur].host_pinned;
}
