/* fake_cuda_runtime.h — the few CUDA runtime calls core/cuda_device/cuda_copy.c makes, faked on
 * the CPU for tests/c/test_cuda_copy.c (never for a real build: cuda_copy.c includes it only
 * when TR_CUDA_COPY_TEST_RUNTIME names it).
 *
 * The model is the strictest one the real runtime allows: "device memory" is host memory,
 * and every copy and memset is only queued on its stream; nothing happens until a sync
 * point (cudaStreamSynchronize, cudaEventSynchronize, or a stream reaching a wait on an
 * event of another stream). So a transfer that refilled a staging buffer before its queued
 * upload ran, or returned before a download landed, reads or leaves wrong bytes, which the
 * test sees. As on a GPU, events and launches belong to the current device: recording an
 * event of device A on a stream of device B, or queueing on a stream of a device that is
 * not current, is an error. fake_fail_at makes the N-th call fail (error paths). Streams
 * made with cudaStreamCreateWithFlags (a copy stream) live beside the devices' own; every
 * queueing call appends a word to fake_trace ("copy@s2 record@s2 wait@s0<s2"; streams are
 * numbered in order of first use), so that a test can assert the order of calls. Test-only
 * globals: the fake is the test's, not the runtime's. */
#ifndef FAKE_CUDA_RUNTIME_H
#define FAKE_CUDA_RUNTIME_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
};

#define cudaHostAllocPortable 1u
#define cudaEventDisableTiming 2u
#define cudaStreamNonBlocking 1u

enum { FAKE_DEVICES = 2, FAKE_QUEUE = 4096 };

typedef struct fake_event *cudaEvent_t;

typedef struct fake_op {
    int kind;            /* 0 copy, 1 memset, 2 record, 3 wait */
    void *dst;           /* wait: the stream that records the event */
    const void *src;
    size_t n;            /* record, wait: the record's sequence number */
    int value;
} fake_op;

typedef struct fake_stream {
    int device;
    fake_op q[FAKE_QUEUE];
    long head, tail;     /* q[head..tail) pending */
    long done_seq;       /* the last record executed on this stream */
} *cudaStream_t;

struct fake_event {
    int device;
    cudaStream_t stream; /* where it was last recorded; NULL when never */
    long seq;            /* that record's sequence number */
};

static struct fake_stream fake_streams[FAKE_DEVICES];
static int fake_current;
static long fake_calls, fake_fail_at;   /* fail_at: the fake_calls value that fails (0: none) */
static cudaError_t fake_fail_with = cudaErrorInvalidValue;
static long fake_host_allocs;           /* live cudaHostAlloc buffers */
static long fake_seq;
static char fake_trace[8192];           /* the queueing calls, in order (fake_trace_clear) */
static cudaStream_t fake_ids[16];       /* stream numbers for the trace */

static inline int fake_stream_id(cudaStream_t s)
{
    for (int i = 0; i < 16; i++) {
        if (fake_ids[i] == s) return i;
        if (!fake_ids[i]) {
            fake_ids[i] = s;
            return i;
        }
    }
    return 15;
}
static inline void fake_trace_clear(void) { fake_trace[0] = 0; }
static inline void fake_note(const char *what, cudaStream_t s, cudaStream_t from)
{
    size_t len = strlen(fake_trace);
    if (len + 40 >= sizeof fake_trace) return;
    if (from) snprintf(fake_trace + len, sizeof fake_trace - len, "%s%s@s%d<s%d", len ? " " : "", what, fake_stream_id(s),
                       fake_stream_id(from));
    else snprintf(fake_trace + len, sizeof fake_trace - len, "%s%s@s%d", len ? " " : "", what, fake_stream_id(s));
}

static cudaError_t fake_enter(void)
{
    fake_calls++;
    return fake_fail_at && fake_calls == fake_fail_at ? fake_fail_with : cudaSuccess;
}

/* Runs s's queue until its record number `seq` has run (seq < 0: all of it). Records run
 * in order, so done_seq >= seq means that record is done. */
static void fake_run_until(cudaStream_t s, long seq)
{
    while (s->head < s->tail && !(seq >= 0 && s->done_seq >= seq)) {
        fake_op *op = &s->q[s->head % FAKE_QUEUE];
        s->head++;
        switch (op->kind) {
        case 0: memcpy(op->dst, op->src, op->n); break;
        case 1: memset(op->dst, op->value, op->n); break;
        case 2: s->done_seq = (long)op->n; break;
        case 3:
            if (op->dst && op->dst != (void *)s) fake_run_until((cudaStream_t)op->dst, (long)op->n);
            break;
        default: break;
        }
    }
}

static cudaError_t fake_push(cudaStream_t s, fake_op op)
{
    if (!s || s->device != fake_current) return cudaErrorInvalidResourceHandle;
    if (s->tail - s->head >= FAKE_QUEUE) fake_run_until(s, -1);
    s->q[s->tail++ % FAKE_QUEUE] = op;
    return cudaSuccess;
}

static inline const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? "out of memory" : e == cudaSuccess ? "no error" : "fake failure";
}
static inline const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation" : "cudaErrorFake";
}
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }

static inline cudaError_t cudaGetDevice(int *d)
{
    *d = fake_current;
    return cudaSuccess;
}
/* Never an injected failure (a real one happens only for a device that does not exist). */
static inline cudaError_t cudaSetDevice(int d)
{
    if (d < 0 || d >= FAKE_DEVICES) return cudaErrorInvalidDevice;
    fake_current = d;
    return cudaSuccess;
}

static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                          cudaStream_t s)
{
    (void)kind;
    cudaError_t e = fake_enter();
    if (!e) fake_note("copy", s, NULL);
    return e ? e : fake_push(s, (fake_op){ .kind = 0, .dst = dst, .src = src, .n = n });
}
static inline cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n,
                                              cudaStream_t s)
{
    (void)ddev, (void)sdev;
    cudaError_t e = fake_enter();
    return e ? e : fake_push(s, (fake_op){ .kind = 0, .dst = dst, .src = src, .n = n });
}
static inline cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
    cudaError_t e = fake_enter();
    return e ? e : fake_push(s, (fake_op){ .kind = 1, .dst = dst, .n = n, .value = value });
}
/* A failed sync still waits for the work (the error is the work's), as the real one does. */
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    cudaError_t e = fake_enter();
    fake_run_until(s, -1);
    return e;
}

/* The creation of an event or a stream (as cudaMalloc, through a void **): an injected failure,
 * or *out a zeroed object of `size` bytes on the current device (its first member, in both), or
 * NULL when out of memory. */
static inline cudaError_t fake_create(void **out, size_t size)
{
    cudaError_t e = fake_enter();
    if (e) return e;
    int *device = calloc(1, size);
    *out = device;
    if (!device) return cudaErrorMemoryAllocation;
    *device = fake_current;
    return cudaSuccess;
}

static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    (void)flags;
    return fake_create((void **)ev, sizeof **ev);
}
static inline cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    cudaError_t e = fake_enter();
    if (e) return e;
    if (!s || ev->device != s->device) return cudaErrorInvalidResourceHandle;
    fake_note("record", s, NULL);
    ev->stream = s;
    ev->seq = ++fake_seq;
    return fake_push(s, (fake_op){ .kind = 2, .n = (size_t)ev->seq });
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    cudaError_t e = fake_enter();
    if (ev->stream) fake_note("hostwait", ev->stream, NULL);
    if (ev->stream) fake_run_until(ev->stream, ev->seq);
    return e;
}
/* Takes the event's latest record at the time of the call, as the real one does. */
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags)
{
    (void)flags;
    cudaError_t e = fake_enter();
    if (e) return e;
    fake_note("wait", s, ev->stream);
    return fake_push(s, (fake_op){ .kind = 3, .dst = ev->stream, .n = (size_t)ev->seq });
}
/* Destroying an event is allowed before its record completes (queued ops hold only its
 * sequence number here). */
static inline cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    free(ev);
    return cudaSuccess;
}

static inline cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    cudaError_t e = fake_enter();
    if (e) return e;
    *p = malloc(n);
    if (!*p) return cudaErrorMemoryAllocation;
    fake_host_allocs++;
    return cudaSuccess;
}
static inline cudaError_t cudaFreeHost(void *p)
{
    if (p) fake_host_allocs--;
    free(p);
    return cudaSuccess;
}

/* A stream of its own (a copy stream) on the current device; its queue runs at its sync
 * points like the devices' streams. */
static long fake_live_streams;
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    cudaError_t e = fake_create((void **)s, sizeof **s);
    if (!e) fake_live_streams++;
    return e;
}
/* The real one lets queued work finish first; so does this. */
static inline cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    fake_run_until(s, -1);
    /* waits queued elsewhere on its records are satisfied now: they must not follow the
     * pointer later */
    for (int d = 0; d < FAKE_DEVICES; d++)
        for (long i = fake_streams[d].head; i < fake_streams[d].tail; i++) {
            fake_op *op = &fake_streams[d].q[i % FAKE_QUEUE];
            if (op->kind == 3 && op->dst == (void *)s) op->dst = NULL;
        }
    for (int i = 0; i < 16; i++)
        if (fake_ids[i] == s) fake_ids[i] = (cudaStream_t)(uintptr_t)1;   /* retired: its number is not reused */
    free(s);
    fake_live_streams--;
    return cudaSuccess;
}

/* Nothing pending on any stream. */
static inline int fake_idle(void)
{
    for (int d = 0; d < FAKE_DEVICES; d++)
        if (fake_streams[d].head != fake_streams[d].tail) return 0;
    return 1;
}

#endif
