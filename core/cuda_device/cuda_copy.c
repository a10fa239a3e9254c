/* cuda_copy.c — transfers to, from and between CUDA devices, and device fills (contract,
 * streams and sync points in cuda_copy.h).
 *
 * Every CUDA call is checked by CALL(), which turns a failure into the context's error
 * "FN DIRECTION cuda:N: <cudaGetErrorString> (<name>; `stmt` at file:line)". A staged
 * transfer that fails half way drains its stream before returning, so that no copy still
 * reads a staging buffer the next transfer refills. The calling thread's current device is
 * restored on every path.
 *
 * The whole file is compiled only with TR_HAVE_CUDA; without it no device backend is
 * registered and core/ctx/ctx.c answers a copy or fill that names a device. */
#ifdef TR_HAVE_CUDA

#include "cuda_copy.h"
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_device.h"
#include "tensor.h"

#ifdef TR_CUDA_COPY_TEST_RUNTIME
/* tests/c/test_cuda_copy.c compiles this file against a fake runtime that queues every
 * copy until a sync point, so that the chunking and the sync points run on the CPU. */
#include TR_CUDA_COPY_TEST_RUNTIME
#else
#include <cuda_runtime.h>
#endif
#include "cuda_sync.h"

struct tr_cuda_staging {
    void *buf[2];   /* TR_CUDA_STAGING_CHUNK bytes each */
    int pinned;     /* 1: cudaHostAlloc (portable, every device); 0: malloc fallback */
};

#ifndef TR_CUDA_COPY_TEST_RUNTIME
/* The device backend's private state, found through the registry rather than
 * cuda_context_backend.c's table: that file calls this one, never the other way. (The test
 * runtime brings its own.) */
tr_cuda_staging *tr_ctx_cuda_staging(tr_ctx *ctx) { return tr_ctx_backend_private(ctx, tr_backend_of(0)); }
#endif

/* One transfer's bookkeeping: where errors go and what they are called. */
typedef struct xfer {
    tr_ctx *ctx;
    char label[96];   /* "tr_tensor_copy to cuda:0" */
    int prev_device;  /* the caller's current device, restored at the end */
} xfer;

/* ------------------------------------------------------------ errors and devices */

static int cuda_fail(xfer *x, cudaError_t e, const char *stmt, int line)
{
    (void)cudaGetLastError();   /* not sticky: the next launch check must not see it again */
    return tr_fail(tr_ctx_err(x->ctx), e == cudaErrorMemoryAllocation ? TR_EOOM : TR_EINTERNAL,
                   "%s: %s (%s; `%s` at %s:%d). An illegal address or a launch failure here usually comes "
                   "from an earlier kernel on this device; rerun under compute-sanitizer to find it.",
                   x->label, cudaGetErrorString(e), cudaGetErrorName(e), stmt, __FILE__, line);
}

/* Expression: TR_OK, or the status of the failed call (the context's error is set). */
#define CALL(x, call) (cuda_fail_if((x), (call), #call, __LINE__))

static int cuda_fail_if(xfer *x, cudaError_t e, const char *stmt, int line)
{
    return e == cudaSuccess ? TR_OK : cuda_fail(x, e, stmt, line);
}

static void xfer_init(xfer *x, tr_ctx *ctx, const char *fn, const char *dir, int device)
{
    x->ctx = ctx;
    snprintf(x->label, sizeof x->label, "%s %s cuda:%d", fn, dir, device);
    if (cudaGetDevice(&x->prev_device) != cudaSuccess) {
        (void)cudaGetLastError();
        x->prev_device = -1;
    }
}

/* Makes `device` current for the calls that follow (events, launches and copies belong to
 * the current device's context). */
static int use_device(xfer *x, int device)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == device) return TR_OK;
    return CALL(x, cudaSetDevice(device));
}

static void xfer_end(xfer *x)
{
    int cur = -1;
    if (x->prev_device >= 0 && cudaGetDevice(&cur) == cudaSuccess && cur != x->prev_device)
        (void)cudaSetDevice(x->prev_device);
    (void)cudaGetLastError();
}

/* The compute stream of `device`; NULL with the context's error set. */
static cudaStream_t stream_of(xfer *x, int device)
{
    void *state = tr_ctx_cuda_state(x->ctx, device);
    return state ? (cudaStream_t)tr_cuda_stream(state) : NULL;
}

/* ------------------------------------------------------------ staging */

tr_cuda_staging *tr_cuda_staging_new(void)
{
    tr_cuda_staging *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->pinned = 1;
    for (int i = 0; i < 2; i++)
        if (cudaHostAlloc(&s->buf[i], TR_CUDA_STAGING_CHUNK, cudaHostAllocPortable) != cudaSuccess) {
            (void)cudaGetLastError();
            s->buf[i] = NULL;
            s->pinned = 0;
        }
    if (!s->pinned) {
        /* The system refused to pin (a locked-memory limit, no driver): pageable buffers
         * work the same, only slower (the driver stages them itself). */
        for (int i = 0; i < 2; i++)
            if (s->buf[i]) (void)cudaFreeHost(s->buf[i]);
        (void)cudaGetLastError();
        s->buf[0] = malloc(TR_CUDA_STAGING_CHUNK);
        s->buf[1] = malloc(TR_CUDA_STAGING_CHUNK);
        if (!s->buf[0] || !s->buf[1]) {
            free(s->buf[0]);
            free(s->buf[1]);
            free(s);
            return NULL;
        }
    }
    return s;
}

void tr_cuda_staging_free(tr_cuda_staging *s)
{
    if (!s) return;
    for (int i = 0; i < 2; i++) {
        if (s->pinned) (void)cudaFreeHost(s->buf[i]);
        else free(s->buf[i]);
    }
    (void)cudaGetLastError();
    free(s);
}

static tr_cuda_staging *staging_of(xfer *x)
{
    tr_cuda_staging *s = tr_ctx_cuda_staging(x->ctx);
    if (!s)
        tr_fail(tr_ctx_err(x->ctx), TR_EOOM, "%s: out of host memory for the 2 x %d MiB staging buffers",
                x->label, TR_CUDA_STAGING_CHUNK >> 20);
    return s;
}

/* Converts or copies n elements on the host (either side may be unaligned: a host buffer
 * may point into a mapped file). */
static void host_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n)
{
    if (dst_dtype == src_dtype) memcpy(dst, src, n * tr_dtype_size(src_dtype));
    else tr_convert_unaligned(dst, dst_dtype, src, src_dtype, n);
}

/* ------------------------------------------------------------ host -> device */

static int host_to_device(xfer *x, void *dst, int device, int dst_dtype, const void *src, int src_dtype, size_t n)
{
    size_t dsize = tr_dtype_size(dst_dtype), ssize = tr_dtype_size(src_dtype);
    int rc = use_device(x, device);
    if (rc != TR_OK) return rc;
    cudaStream_t stream = stream_of(x, device);
    if (!stream) return tr_ctx_err(x->ctx)->status;
    if (dst_dtype == src_dtype && n * dsize <= TR_CUDA_DIRECT_BYTES) {
        if ((rc = CALL(x, cudaMemcpyAsync(dst, src, n * dsize, cudaMemcpyHostToDevice, stream))) != TR_OK) return rc;
        return CALL(x, tr_sync_stream(stream));
    }
    tr_cuda_staging *stg = staging_of(x);
    if (!stg) return TR_EOOM;
    cudaEvent_t ev[2] = { NULL, NULL };
    size_t chunk = TR_CUDA_STAGING_CHUNK / dsize;
    for (int b = 0; b < 2 && rc == TR_OK; b++)
        rc = CALL(x, cudaEventCreateWithFlags(&ev[b], cudaEventDisableTiming));
    /* Chunk k goes through buffer k % 2: before refilling a buffer, wait for the upload
     * that last read it; the conversion of chunk k overlaps the upload of chunk k - 1. */
    for (size_t off = 0, k = 0; off < n && rc == TR_OK; off += chunk, k++) {
        size_t cnt = n - off < chunk ? n - off : chunk;
        int b = (int)(k & 1);
        if (k >= 2 && (rc = CALL(x, tr_sync_event(ev[b]))) != TR_OK) break;
        host_convert(stg->buf[b], dst_dtype, (const char *)src + off * ssize, src_dtype, cnt);
        rc = CALL(x, cudaMemcpyAsync((char *)dst + off * dsize, stg->buf[b], cnt * dsize, cudaMemcpyHostToDevice,
                                     stream));
        if (rc == TR_OK) rc = CALL(x, cudaEventRecord(ev[b], stream));
    }
    /* Done when the call returns, failed or not: no upload may still read the staging. */
    if (rc == TR_OK) rc = CALL(x, tr_sync_stream(stream));
    else (void)tr_sync_stream(stream);
    for (int b = 0; b < 2; b++)
        if (ev[b]) (void)cudaEventDestroy(ev[b]);
    return rc;
}

/* ------------------------------------------------------------ device -> host */

static int device_to_host(xfer *x, void *dst, int dst_dtype, const void *src, int device, int src_dtype, size_t n)
{
    size_t dsize = tr_dtype_size(dst_dtype), ssize = tr_dtype_size(src_dtype);
    int rc = use_device(x, device);
    if (rc != TR_OK) return rc;
    cudaStream_t stream = stream_of(x, device);
    if (!stream) return tr_ctx_err(x->ctx)->status;
    if (dst_dtype == src_dtype && n * ssize <= TR_CUDA_DIRECT_BYTES) {
        if ((rc = CALL(x, tr_copy_to_host_async(dst, src, n * ssize, stream))) != TR_OK) return rc;
        return CALL(x, tr_sync_stream(stream));
    }
    tr_cuda_staging *stg = staging_of(x);
    if (!stg) return TR_EOOM;
    cudaEvent_t ev[2] = { NULL, NULL };
    size_t chunk = TR_CUDA_STAGING_CHUNK / ssize;
    size_t nchunks = (n + chunk - 1) / chunk;
    for (int b = 0; b < 2 && rc == TR_OK; b++)
        rc = CALL(x, cudaEventCreateWithFlags(&ev[b], cudaEventDisableTiming));
    /* The download of chunk k + 1 is queued before chunk k is converted on the host. */
    for (size_t k = 0; k <= nchunks && rc == TR_OK; k++) {
        if (k < nchunks) {
            size_t off = k * chunk, cnt = n - off < chunk ? n - off : chunk;
            int b = (int)(k & 1);
            rc = CALL(x, tr_copy_to_host_async(stg->buf[b], (const char *)src + off * ssize, cnt * ssize, stream));
            if (rc == TR_OK) rc = CALL(x, cudaEventRecord(ev[b], stream));
        }
        if (k >= 1 && rc == TR_OK) {
            size_t j = k - 1, off = j * chunk, cnt = n - off < chunk ? n - off : chunk;
            int b = (int)(j & 1);
            if ((rc = CALL(x, tr_sync_event(ev[b]))) != TR_OK) break;
            host_convert((char *)dst + off * dsize, dst_dtype, stg->buf[b], src_dtype, cnt);
        }
    }
    if (rc != TR_OK) (void)tr_sync_stream(stream);
    for (int b = 0; b < 2; b++)
        if (ev[b]) (void)cudaEventDestroy(ev[b]);
    return rc;
}

/* ------------------------------------------------------------ device -> device */

/* Same dtype: one copy on the destination's stream, nothing waits on the host. Between two
 * GPUs the copy waits for the source stream's earlier work, and the source stream's later
 * work waits for the copy. */
static int device_to_device(xfer *x, void *dst, int ddev, const void *src, int sdev, size_t bytes)
{
    int rc = use_device(x, ddev);
    if (rc != TR_OK) return rc;
    cudaStream_t ds = stream_of(x, ddev);
    if (!ds) return tr_ctx_err(x->ctx)->status;
    if (ddev == sdev) return CALL(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ds));

    cudaStream_t ss = stream_of(x, sdev);
    if (!ss) return tr_ctx_err(x->ctx)->status;
    cudaEvent_t src_ready = NULL, copied = NULL;
    if ((rc = use_device(x, sdev)) == TR_OK &&
        (rc = CALL(x, cudaEventCreateWithFlags(&src_ready, cudaEventDisableTiming))) == TR_OK)
        rc = CALL(x, cudaEventRecord(src_ready, ss));
    if (rc == TR_OK && (rc = use_device(x, ddev)) == TR_OK && (rc = CALL(x, cudaStreamWaitEvent(ds, src_ready, 0))) == TR_OK &&
        (rc = CALL(x, cudaMemcpyPeerAsync(dst, ddev, src, sdev, bytes, ds))) == TR_OK &&
        (rc = CALL(x, cudaEventCreateWithFlags(&copied, cudaEventDisableTiming))) == TR_OK &&
        (rc = CALL(x, cudaEventRecord(copied, ds))) == TR_OK && (rc = use_device(x, sdev)) == TR_OK)
        rc = CALL(x, cudaStreamWaitEvent(ss, copied, 0));
    /* Destroying a recorded event is allowed before it completes (released when it does). */
    if (src_ready) (void)cudaEventDestroy(src_ready);
    if (copied) (void)cudaEventDestroy(copied);
    return rc;
}

/* A dtype change between device buffers: down, converted on the host, up again, a chunk at a
 * time (synchronous; the op table's CUDA cast is not used here). */
static int device_convert(xfer *x, void *dst, int ddev, int dst_dtype, const void *src, int sdev, int src_dtype,
                          size_t n)
{
    size_t dsize = tr_dtype_size(dst_dtype), ssize = tr_dtype_size(src_dtype);
    tr_cuda_staging *stg = staging_of(x);
    if (!stg) return TR_EOOM;
    cudaStream_t ds = stream_of(x, ddev), ss = stream_of(x, sdev);
    if (!ds || !ss) return tr_ctx_err(x->ctx)->status;
    size_t chunk = TR_CUDA_STAGING_CHUNK / (dsize > ssize ? dsize : ssize);
    int rc = TR_OK;
    for (size_t off = 0; off < n && rc == TR_OK; off += chunk) {
        size_t cnt = n - off < chunk ? n - off : chunk;
        if ((rc = use_device(x, sdev)) != TR_OK) break;
        if ((rc = CALL(x, tr_copy_to_host_async(stg->buf[0], (const char *)src + off * ssize, cnt * ssize, ss))) != TR_OK)
            break;
        if ((rc = CALL(x, tr_sync_stream(ss))) != TR_OK) break;
        tr_convert(stg->buf[1], dst_dtype, stg->buf[0], src_dtype, cnt);
        if ((rc = use_device(x, ddev)) != TR_OK) break;
        if ((rc = CALL(x, cudaMemcpyAsync((char *)dst + off * dsize, stg->buf[1], cnt * dsize,
                                          cudaMemcpyHostToDevice, ds))) != TR_OK)
            break;
        rc = CALL(x, tr_sync_stream(ds));
    }
    if (rc != TR_OK) {
        (void)tr_sync_stream(ss);
        (void)tr_sync_stream(ds);
    }
    return rc;
}

/* ------------------------------------------------------------ entry points */

int tr_cuda_copy(tr_ctx *ctx, const char *fn, void *dst, int dst_device, int dst_dtype, const void *src,
                 int src_device, int src_dtype, size_t n)
{
    xfer x;
    int dev = dst_device != TR_CPU ? dst_device : src_device;
    xfer_init(&x, ctx, fn, dst_device != TR_CPU ? "to" : "from", dev);
    int rc = TR_OK;
    if (n == 0) {
        /* nothing moves */
    } else if (src_device == TR_CPU) {
        rc = host_to_device(&x, dst, dst_device, dst_dtype, src, src_dtype, n);
    } else if (dst_device == TR_CPU) {
        rc = device_to_host(&x, dst, dst_dtype, src, src_device, src_dtype, n);
    } else if (dst_dtype == src_dtype) {
        rc = device_to_device(&x, dst, dst_device, src, src_device, n * tr_dtype_size(src_dtype));
    } else {
        rc = device_convert(&x, dst, dst_device, dst_dtype, src, src_device, src_dtype, n);
    }
    xfer_end(&x);
    return rc;
}

int tr_cuda_fill(tr_ctx *ctx, const char *fn, void *dst, int device, const void *elem, size_t esize, size_t n)
{
    xfer x;
    xfer_init(&x, ctx, fn, "on", device);
    const unsigned char *e = elem;
    int rc = use_device(&x, device);
    cudaStream_t stream = rc == TR_OK ? stream_of(&x, device) : NULL;
    if (rc == TR_OK && !stream) rc = tr_ctx_err(ctx)->status;
    int uniform = 1;
    for (size_t i = 1; i < esize; i++) uniform &= e[i] == e[0];
    if (rc == TR_OK && n > 0) {
        if (uniform) {
            /* zero, and every value whose bytes are all alike: one memset */
            rc = CALL(&x, cudaMemsetAsync(dst, e[0], n * esize, stream));
        } else {
            /* The first element byte by byte (no host buffer to keep alive), then the filled
             * prefix copied onto the rest, doubling: esize + log2(n) queued calls. */
            for (size_t i = 0; i < esize && rc == TR_OK; i++)
                rc = CALL(&x, cudaMemsetAsync((char *)dst + i, e[i], 1, stream));
            size_t total = n * esize;
            for (size_t have = esize; have < total && rc == TR_OK; have *= 2) {
                size_t len = total - have < have ? total - have : have;
                rc = CALL(&x, cudaMemcpyAsync((char *)dst + have, dst, len, cudaMemcpyDeviceToDevice, stream));
            }
        }
    }
    xfer_end(&x);
    return rc;
}

#endif
