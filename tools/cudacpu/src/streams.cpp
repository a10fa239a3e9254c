/* streams.cpp (cudacpu) — streams and events. Each stream is a FIFO of work (kernels,
 * copies, fills, event records, waits on another stream's position). In CUDACPU_STREAMS=sync
 * work runs as it is queued; in deferred mode it runs only when something forces it, and
 * then only as far as CUDA's ordering rules say must have happened:
 *   - a synchronisation (stream, event, device; an event query runs the event's work but
 *     first answers cudaErrorNotReady), a blocking copy (memory.cpp), cudaFree;
 *   - a wait queued by cudaStreamWaitEvent runs the recording stream up to that record;
 *   - the legacy default stream (NULL) and streams created without cudaStreamNonBlocking
 *     wait for each other: work queued on one is preceded by a wait for what the others
 *     have queued so far.
 * So a missing cudaStreamWaitEvent between two streams shows as stale data, as on a GPU.
 * Invariants: every piece of work has a sequence number, increasing in queue order across all
 * streams; a wait names a position earlier than itself, so running one never loops. Runs
 * under api_mutex. */
#include "internal.h"

#include <cstdio>
#include <cstring>
#include <deque>
#include <unordered_set>

struct CUevent_st {
    unsigned flags = 0;
    CUstream_st *stream = nullptr;    /* where the last record was queued */
    unsigned long long recorded = 0;  /* that record's sequence number (0: never recorded) */
    unsigned long long completed = 0; /* the last record that ran */
    int pending = 0;                  /* records queued and not run */
    bool destroyed = false;           /* freed when the last pending record runs */
};

namespace cudacpu {

enum work_kind { W_KERNEL, W_COPY, W_FILL, W_RECORD, W_WAIT, W_HOST };

struct work {
    work_kind kind = W_KERNEL;
    unsigned long long seq = 0;
    /* W_KERNEL */
    launch_config lc{};
    const char *name = nullptr;
    void (*call)(void *) = nullptr; /* W_HOST too: the host function, called with ctx */
    void (*destroy)(void *) = nullptr;
    void *ctx = nullptr;
    /* W_COPY, W_FILL */
    void *dst = nullptr;
    const void *src = nullptr;
    char *snapshot = nullptr; /* owned: the source as it was when queued */
    size_t n = 0;
    int value = 0;
    /* W_RECORD */
    CUevent_st *event = nullptr;
    /* W_WAIT: run `on` up to and including `upto` */
    CUstream_st *on = nullptr;
    unsigned long long upto = 0;

    /* One constructor a kind; the fields the kind does not use keep their defaults. */
    work() = default;
    work(const launch_config &c, const char *name, void (*call)(void *), void (*destroy)(void *), void *ctx)
        : kind(W_KERNEL), lc(c), name(name), call(call), destroy(destroy), ctx(ctx)
    {
    }
    work(void *dst, const void *src, char *snapshot, size_t n)
        : kind(W_COPY), dst(dst), src(src), snapshot(snapshot), n(n)
    {
    }
    work(void *dst, int value, size_t n) : kind(W_FILL), dst(dst), n(n), value(value) {}
    explicit work(CUevent_st *event) : kind(W_RECORD), event(event) {}
    work(CUstream_st *on, unsigned long long upto) : kind(W_WAIT), on(on), upto(upto) {}
    work(void (*call)(void *), void *ctx) : kind(W_HOST), call(call), ctx(ctx) {}
};

} // namespace cudacpu

struct CUstream_st {
    std::deque<cudacpu::work> q;
    unsigned flags = 0;
    int device = 0;
    bool legacy = false;
};

namespace cudacpu {

static CUstream_st legacy_stream;
static std::unordered_set<CUstream_st *> live_streams; /* created and not destroyed */
static unsigned long long next_seq;

CUstream_st *stream_of(cudaStream_t s)
{
    if (!s) {
        legacy_stream.legacy = true;
        return &legacy_stream;
    }
    return live_streams.count(s) ? s : nullptr;
}

static bool blocking(const CUstream_st *s) { return !s->legacy && !(s->flags & cudaStreamNonBlocking); }

static void push_raw(CUstream_st *s, work &&w)
{
    w.seq = ++next_seq;
    s->q.push_back(static_cast<work &&>(w));
}

static void push_wait(CUstream_st *s, CUstream_st *on) { push_raw(s, work(on, on->q.back().seq)); }

static void run_stream(CUstream_st *s, unsigned long long upto);

/* Queues w on s after the implicit waits of the legacy stream's rules; runs it at once in
 * sync mode. Returns the sequence number given to w. */
static unsigned long long push(CUstream_st *s, work &&w)
{
    if (s->legacy) {
        for (CUstream_st *o : live_streams)
            if (blocking(o) && !o->q.empty()) push_wait(s, o);
    } else if (blocking(s) && !legacy_stream.q.empty()) {
        push_wait(s, &legacy_stream);
    }
    push_raw(s, static_cast<work &&>(w));
    const unsigned long long seq = next_seq;
    if (!cfg().deferred) run_stream(s, seq);
    return seq;
}

static void execute(work &w)
{
    switch (w.kind) {
    case W_KERNEL: {
        const cudaError_t e = run_grid(w.lc, w.call, w.ctx, w.name);
        w.destroy(w.ctx);
        if (e != cudaSuccess && !cfg().deferred) set_err(e); /* sync mode: seen at the launch, as before */
        break;
    }
    case W_COPY:
        memmove(w.dst, w.snapshot ? w.snapshot : w.src, w.n);
        delete[] w.snapshot;
        break;
    case W_FILL: memset(w.dst, w.value, w.n); break;
    case W_HOST: w.call(w.ctx); break;
    case W_RECORD: {
        CUevent_st *e = w.event;
        if (w.seq > e->completed) e->completed = w.seq;
        if (--e->pending == 0 && e->destroyed) delete e;
        break;
    }
    case W_WAIT:
        /* a destroyed stream ran all its work when destroyed; one created since at the same
         * address holds only later sequence numbers, which `upto` does not reach */
        if (live_streams.count(w.on) || w.on == &legacy_stream) run_stream(w.on, w.upto);
        break;
    }
}

/* Runs s's work up to and including sequence number upto. Kernel failures are noted as they
 * happen (note_launch_failure); the synchronising call reports them. A wait may run another
 * stream, and that stream's waits this one, but only positions already run. */
static void run_stream(CUstream_st *s, unsigned long long upto)
{
    while (!s->q.empty() && s->q.front().seq <= upto) {
        work w = static_cast<work &&>(s->q.front());
        s->q.pop_front();
        execute(w);
    }
}

cudaError_t run_all_streams()
{
    run_stream(&legacy_stream, ~0ull);
    for (CUstream_st *s : live_streams) run_stream(s, ~0ull); /* running one never queues work */
    return cudaSuccess;
}

void queue_kernel(CUstream_st *s, const launch_config &c, const char *name, void (*call)(void *),
                  void (*destroy)(void *), void *ctx)
{
    push(s, work(c, name, call, destroy, ctx));
}

cudaError_t queue_copy(CUstream_st *s, void *dst, const void *src, char *src_snapshot, size_t n, bool wait)
{
    const unsigned long long seq = push(s, work(dst, src, src_snapshot, n));
    if (!wait || !cfg().deferred) return cudaSuccess;
    run_stream(s, seq);
    return take_unreported();
}

cudaError_t queue_fill(CUstream_st *s, void *dst, int value, size_t n)
{
    push(s, work(dst, value, n));
    return cudaSuccess;
}

/* What a synchronising call returns once its work ran: in deferred mode the kernel failure
 * not yet reported; in sync mode (where a failure was reported at its launch) the calling
 * thread's last error, as a synchronisation returned before streams were emulated. */
static cudaError_t sync_result() { return cfg().deferred ? set_err(take_unreported()) : peek_err(); }

} // namespace cudacpu

using namespace cudacpu;

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    api_lock lk(api_mutex);
    if (!s || (flags & ~cudaStreamNonBlocking)) return set_err(cudaErrorInvalidValue);
    int dev = 0;
    cudaGetDevice(&dev);
    CUstream_st *st = new CUstream_st;
    st->flags = flags;
    st->device = dev;
    live_streams.insert(st);
    *s = st;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    api_lock lk(api_mutex);
    CUstream_st *st = s ? stream_of(s) : nullptr;
    if (!st) return set_err(cudaErrorInvalidResourceHandle);
    /* CUDA finishes a destroyed stream's work in the background; here it runs now */
    run_stream(st, ~0ull);
    live_streams.erase(st);
    delete st;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    api_lock lk(api_mutex);
    counts.stream_syncs++;
    CUstream_st *st = stream_of(s);
    if (!st) return set_err(cudaErrorInvalidResourceHandle);
    run_stream(st, ~0ull);
    return sync_result();
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    api_lock lk(api_mutex);
    counts.stream_queries++;
    CUstream_st *st = stream_of(s);
    if (!st) return set_err(cudaErrorInvalidResourceHandle);
    if (st->q.empty()) return sync_result();
    run_stream(st, ~0ull); /* done by the next query, as a polling loop expects */
    return cudaErrorNotReady;
}

/* fn(user) runs in the stream's order, under the runtime's lock: as in CUDA, it must not
 * call the runtime. The cuBLASLt stand-in queues its products this way. */
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user)
{
    api_lock lk(api_mutex);
    CUstream_st *st = stream_of(s);
    if (!st) return set_err(cudaErrorInvalidResourceHandle);
    if (!fn) return set_err(cudaErrorInvalidValue);
    log_launch("cudaLaunchHostFunc", config(dim3(1), dim3(1)), nullptr);
    push(st, work(fn, user));
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    api_lock lk(api_mutex);
    counts.stream_waits++;
    CUstream_st *st = stream_of(s);
    if (!st || !e) return set_err(cudaErrorInvalidResourceHandle);
    if (flags) return set_err(cudaErrorInvalidValue);
    /* the record the wait refers to is the latest one queued when the wait is queued */
    if (e->completed >= e->recorded || e->stream == st) return cudaSuccess;
    push(st, work(e->stream, e->recorded));
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    api_lock lk(api_mutex);
    if (!e || (flags & ~(cudaEventDisableTiming | 1u))) return set_err(cudaErrorInvalidValue);
    *e = new CUevent_st;
    (*e)->flags = flags;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    api_lock lk(api_mutex);
    if (!e || e->destroyed) return set_err(cudaErrorInvalidResourceHandle);
    if (e->pending) e->destroyed = true; /* its queued records still run */
    else delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    api_lock lk(api_mutex);
    counts.event_records++;
    CUstream_st *st = stream_of(s);
    if (!st || !e || e->destroyed) return set_err(cudaErrorInvalidResourceHandle);
    e->pending++;
    e->stream = st;
    e->recorded = push(st, work(e)); /* in sync mode it ran already: completed == recorded */
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    api_lock lk(api_mutex);
    counts.event_syncs++;
    if (!e || e->destroyed) return set_err(cudaErrorInvalidResourceHandle);
    if (e->completed < e->recorded) run_stream(e->stream, e->recorded);
    return sync_result();
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    api_lock lk(api_mutex);
    counts.event_queries++;
    if (!e || e->destroyed) return set_err(cudaErrorInvalidResourceHandle);
    if (e->completed >= e->recorded) return sync_result();
    run_stream(e->stream, e->recorded); /* complete by the next query */
    return cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    api_lock lk(api_mutex);
    if (!ms || !a || !b) return set_err(cudaErrorInvalidResourceHandle);
    if ((a->flags | b->flags) & cudaEventDisableTiming) return set_err(cudaErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded) return set_err(cudaErrorInvalidResourceHandle);
    if (a->completed < a->recorded || b->completed < b->recorded) return cudaErrorNotReady;
    *ms = 0.0f; /* no timing is emulated */
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    api_lock lk(api_mutex);
    counts.device_syncs++;
    run_all_streams();
    return sync_result();
}

} // extern "C"
