/* nccl.cu (cudacpu tests) — the NCCL stand-in (src/nccl_*.c) between processes, as
 * tests/run.sh runs it: `nccl CASE` forks one process per rank (the parent makes the
 * unique id and touches no CUDA), each rank uses the emulated runtime linked into this program
 * (exported: the stand-in queues its collectives through cudaLaunchHostFunc), and the parent
 * compares what the ranks left in a shared page. A case prints nothing and exits 0 when the
 * stand-in behaves as the real library's contract says; else a "why:" line and exit status 1.
 *   values           every type and operator, in place and not, against sums exact in any
 *                    order, the same bits on both ranks, the segment gone from /dev/shm
 *   rank_order       3 ranks whose f32 sum depends on the order: rank 0, 1, 2 on every rank
 *   group_chunks     one group of three all-reduces, one of 2.4 MB (three chunks), one empty
 *   stream_order     a collective queued after an upload on its stream sees the upload, and
 *                    (deferred) has not run before the stream is forced
 *   missing_wait     (deferred) the upload on another stream without an event wait: the
 *                    collective reduces the stale data; missing_wait_twin: with the wait
 *   destroy_flushes  ncclCommDestroy right after the call: the queued collective still runs
 *   timeout          a rank that never arrives: ncclRemoteError after CUDACPU_NCCL_TIMEOUT,
 *                    the output NaN, the communicator in error state
 *   peer_exit        a rank whose process exits: the other's wait ends well before the timeout
 *   peer_abort       a rank that calls ncclCommAbort: likewise
 *   abort_unblocks   ncclCommAbort from another thread ends a collective blocked on a peer
 *   mismatch         ranks calling different collectives: ncclInvalidUsage on both
 *   init_missing_rank  ncclCommInitRank with a rank that never joins: ncclRemoteError at the
 *                    timeout, nothing left in /dev/shm
 *   init_checks      a zero (never broadcast) id, a rank out of range, two ranks on one device
 *   call_checks      invalid arguments (ncclInvalidArgument), group misuse (ncclInvalidUsage) */
#include "check.h"

#include <nccl.h>

#include "cudacpu_half_bits.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ checks */

static int my_rank = -1; /* in a rank's process; -1 in the parent */

#define NCCL_IS(want, call)                                                                                            \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        CHECK(r_ == (want), "rank %d: %s returned %d (%s), expected %d; last error: %s", my_rank, #call, (int)r_,      \
              ncclGetErrorString(r_), (int)(want), ncclGetLastError(NULL));                                            \
    } while (0)
#define NCCL_OK(call) NCCL_IS(ncclSuccess, call)
#define LAST_ERROR_HAS(text)                                                                                           \
    CHECK(strstr(ncclGetLastError(NULL), text), "rank %d: the last error lacks \"%s\": %s", my_rank, text,             \
          ncclGetLastError(NULL))

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool deferred()
{
    return env_is("CUDACPU_STREAMS", "sync", "deferred");
}

/* ------------------------------------------------------------ ranks as processes */

enum { MAX_RANKS = 4, RESULT_BYTES = 1 << 16 };

/* what the ranks leave for the parent: each rank's result bytes */
typedef struct {
    unsigned char result[MAX_RANKS][RESULT_BYTES];
    size_t result_bytes[MAX_RANKS];
} shared_page;

static shared_page *shared;
static ncclUniqueId the_id;

typedef void (*rank_body)(int rank, int nranks);

/* Runs body on nranks forked processes (each on device = its rank) and waits for all; fails
 * when one fails. */
static void run_ranks(int nranks, rank_body body)
{
    if (!shared) {
        shared = (shared_page *)mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(shared != MAP_FAILED, "mmap of the shared page failed");
    }
    memset(shared, 0, sizeof *shared);
    NCCL_OK(ncclGetUniqueId(&the_id));
    pid_t pids[MAX_RANKS];
    for (int r = 0; r < nranks; r++) {
        fflush(stdout);
        pids[r] = fork();
        CHECK(pids[r] >= 0, "fork failed");
        if (pids[r] == 0) {
            my_rank = r;
            CUDA_OK(cudaSetDevice(r));
            body(r, nranks);
            fflush(stdout);
            _exit(0);
        }
    }
    int bad = 0;
    for (int r = 0; r < nranks; r++) {
        int status = 0;
        CHECK(waitpid(pids[r], &status, 0) == pids[r], "waitpid failed");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
    }
    if (bad) exit(1); /* the rank printed why */
}

static void keep_result(int rank, const void *p, size_t bytes)
{
    CHECK(bytes <= RESULT_BYTES, "result too large");
    memcpy(shared->result[rank], p, bytes);
    shared->result_bytes[rank] = bytes;
}

/* every rank left the same bytes */
static void same_on_every_rank(int nranks)
{
    for (int r = 1; r < nranks; r++) {
        CHECK(shared->result_bytes[r] == shared->result_bytes[0] &&
                  !memcmp(shared->result[r], shared->result[0], shared->result_bytes[0]),
              "rank %d's result differs from rank 0's", r);
    }
}

/* A case of rank processes: body on NRANKS ranks, then, when SAME, the check that every rank kept
 * the same result bytes (keep_result). */
template <int NRANKS, rank_body BODY, bool SAME = false> static void on_ranks()
{
    run_ranks(NRANKS, BODY);
    if (SAME) same_on_every_rank(NRANKS);
}

static ncclComm_t join(int rank, int nranks)
{
    ncclComm_t c = NULL;
    NCCL_OK(ncclCommInitRank(&c, nranks, the_id, rank));
    return c;
}

/* a device copy of host, finished: a pageable upload is queued on the legacy stream, which a
 * non-blocking stream does not wait for */
template <class T> static T *dev_copy(const T *host, size_t bytes)
{
    T *d = nullptr;
    CUDA_OK(cudaMalloc((void **)&d, bytes));
    CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    return d;
}

static int all_bytes(const void *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != v) return 0;
    return 1;
}

/* the emulator's device memory is host memory: read it without forcing any stream */
static float peek(const float *d, int i)
{
    return d[i];
}

/* ------------------------------------------------------------ values */

enum { N = 40 };

/* rank r's i-th value: small multiples of 1/2, so sums of two are exact in every float type */
static double value(int r, int i)
{
    return (double)((i * 7 + r * 3) % 11 - 5) + (r ? 0.5 : 0.0);
}

static void values_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    char name[80];
    snprintf(name, sizeof name, "/dev/shm/cudacpu-nccl-");
    for (int i = 16; i < 32; i++) snprintf(name + strlen(name), 3, "%02x", (unsigned char)the_id.internal[i]);
    struct stat st;
    CHECK(stat(name, &st) != 0, "%s is still there after every rank joined", name);
    int count = 0, dev = -1, me = -1;
    NCCL_OK(ncclCommCount(c, &count));
    NCCL_OK(ncclCommCuDevice(c, &dev));
    NCCL_OK(ncclCommUserRank(c, &me));
    CHECK(count == 2 && dev == rank && me == rank, "count %d, device %d, rank %d", count, dev, me);

    unsigned char all[RESULT_BYTES], *out = all;
    const struct {
        ncclDataType_t t;
        ncclRedOp_t op;
        int in_place;
    } cases[] = {
        {ncclFloat32, ncclSum, 0},  {ncclFloat32, ncclAvg, 1},  {ncclFloat32, ncclMax, 0}, {ncclFloat64, ncclMin, 0},
        {ncclFloat64, ncclProd, 1}, {ncclBfloat16, ncclAvg, 1}, {ncclFloat16, ncclSum, 0}, {ncclInt32, ncclAvg, 0},
        {ncclInt64, ncclSum, 1},    {ncclInt8, ncclMax, 0},     {ncclUint8, ncclSum, 0},   {ncclUint32, ncclProd, 0},
    };
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ncclDataType_t t = cases[k].t;
        const ncclRedOp_t op = cases[k].op;
        size_t es = t == ncclFloat64 || t == ncclInt64      ? 8
                    : t == ncclFloat16 || t == ncclBfloat16 ? 2
                    : t == ncclInt8 || t == ncclUint8       ? 1
                                                            : 4;
        unsigned char host[N * 8], want[N * 8], got[N * 8];
        for (int i = 0; i < N; i++) {
            const double a = value(rank, i), x0 = value(0, i), x1 = value(1, i);
            const double w = op == ncclSum    ? x0 + x1
                             : op == ncclAvg  ? (x0 + x1) / 2
                             : op == ncclProd ? x0 * x1
                             : op == ncclMax  ? (x0 > x1 ? x0 : x1)
                                              : (x0 < x1 ? x0 : x1);
            /* the integer cases take whole values (times 2), unsigned ones their magnitude */
            const int64_t ia = (int64_t)(2 * a), i0 = (int64_t)(2 * x0), i1 = (int64_t)(2 * x1);
            const int64_t iw = op == ncclSum    ? i0 + i1
                               : op == ncclAvg  ? (i0 + i1) / 2
                               : op == ncclProd ? i0 * i1
                               : op == ncclMax  ? (i0 > i1 ? i0 : i1)
                                                : (i0 < i1 ? i0 : i1);
            const uint64_t ua = (uint64_t)llabs(ia), u0 = (uint64_t)llabs(i0), u1 = (uint64_t)llabs(i1);
            const uint64_t uw = op == ncclSum ? u0 + u1 : u0 * u1;
/* element i of a byte buffer as type T (memcpy: no alignment or aliasing assumed) */
#define PUT(T, buf, val)                                                                                               \
    do {                                                                                                               \
        T x_ = (T)(val);                                                                                               \
        memcpy((buf) + i * sizeof x_, &x_, sizeof x_);                                                                 \
    } while (0)
            switch (t) {
            case ncclFloat32:
                PUT(float, host, a);
                PUT(float, want, w);
                break;
            case ncclFloat64:
                PUT(double, host, a);
                PUT(double, want, w);
                break;
            case ncclBfloat16:
                PUT(uint16_t, host, cudacpu_f32_to_bf16((float)a));
                PUT(uint16_t, want, cudacpu_f32_to_bf16((float)w));
                break;
            case ncclFloat16:
                PUT(uint16_t, host, cudacpu_f32_to_f16((float)a));
                PUT(uint16_t, want, cudacpu_f32_to_f16((float)w));
                break;
            case ncclInt32:
                PUT(int32_t, host, ia);
                PUT(int32_t, want, iw);
                break;
            case ncclInt64:
                PUT(int64_t, host, ia);
                PUT(int64_t, want, iw);
                break;
            case ncclInt8:
                PUT(int8_t, host, ia);
                PUT(int8_t, want, iw);
                break;
            case ncclUint8:
                PUT(uint8_t, host, ua);
                PUT(uint8_t, want, uw);
                break;
            default:
                PUT(uint32_t, host, ua);
                PUT(uint32_t, want, uw);
                break;
            }
#undef PUT
        }
        void *send = dev_copy(host, N * es), *recv = send;
        if (!cases[k].in_place) CUDA_OK(cudaMalloc(&recv, N * es));
        NCCL_OK(ncclAllReduce(send, recv, N, t, op, c, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CUDA_OK(cudaMemcpy(got, recv, N * es, cudaMemcpyDeviceToHost));
        for (int i = 0; i < N; i++) {
            CHECK(!memcmp(got + i * es, want + i * es, es), "case %zu (type %d, op %d): element %d differs", k, (int)t,
                  (int)op, i);
        }
        memcpy(out, got, N * es);
        out += N * es;
        CUDA_OK(cudaFree(send));
        if (recv != send) CUDA_OK(cudaFree(recv));
    }
    keep_result(rank, all, (size_t)(out - all));
    ncclResult_t async = ncclInternalError;
    NCCL_OK(ncclCommGetAsyncError(c, &async));
    CHECK(async == ncclSuccess, "async error %d after good collectives", (int)async);
    CUDA_OK(cudaStreamDestroy(s));
    NCCL_OK(ncclCommDestroy(c));
}

/* (1e8 + 1) - 1e8 is 0 in f32 (1e8 + 1 rounds to 1e8); another order gives 1 */
static void rank_order_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    const float mine[3] = {1e8f, 1.0f, -1e8f};
    float h[N];
    for (int i = 0; i < N; i++) h[i] = mine[rank];
    float *d = dev_copy(h, sizeof h);
    NCCL_OK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, NULL));
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) CHECK(h[i] == 0.0f, "element %d is %g, not 0: not summed in rank order", i, h[i]);
    /* ncclAvg: each input times (float)(1/3) first, then the sum in rank order */
    const float third = 1.0f / 3.0f, want = (mine[0] * third + mine[1] * third) + mine[2] * third;
    for (int i = 0; i < N; i++) h[i] = mine[rank];
    CUDA_OK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllReduce(d, d, N, ncclFloat32, ncclAvg, c, NULL));
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == want, "ncclAvg gives %.9g, pre-multiplied in rank order %.9g", h[0], want);
    keep_result(rank, h, sizeof h);
    CUDA_OK(cudaFree(d));
    NCCL_OK(ncclCommDestroy(c));
}

/* ------------------------------------------------------------ groups, streams */

static void group_chunks_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    enum { BIG = 600000, SMALL = 5 };
    float *h = (float *)malloc(BIG * sizeof *h);
    CHECK(h, "malloc");
    for (int i = 0; i < BIG; i++) h[i] = (float)(i % 1000) + (float)rank;
    float *big = dev_copy(h, BIG * sizeof *h), *small = dev_copy(h, SMALL * sizeof *h), *none = small;
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(big, big, BIG, ncclFloat32, ncclAvg, c, s));
    NCCL_OK(ncclAllReduce(none, none, 0, ncclFloat32, ncclAvg, c, s));
    NCCL_OK(ncclAllReduce(small, small, SMALL, ncclFloat32, ncclSum, c, s));
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(h, big, BIG * sizeof *h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < BIG; i++)
        CHECK(h[i] == (float)(i % 1000) + 0.5f, "big element %d is %g, expected %g", i, h[i], (float)(i % 1000) + 0.5f);
    CUDA_OK(cudaMemcpy(h, small, SMALL * sizeof *h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < SMALL; i++) CHECK(h[i] == (float)(2 * i + 1), "small element %d is %g", i, h[i]);
    free(h);
    CUDA_OK(cudaStreamDestroy(s));
    NCCL_OK(ncclCommDestroy(c));
}

/* d = 7 everywhere (finished), then an upload of rank + 1 from pinned memory on `copy`, and the
 * collective on `coll` (the same stream, or another one with or without an event wait) */
static void upload_then_reduce(int rank, int nranks, int same_stream, int wait, float *out_before_sync,
                               float *out_after)
{
    ncclComm_t c = join(rank, nranks);
    float *d = NULL, *pinned = NULL;
    CUDA_OK(cudaMalloc((void **)&d, N * sizeof *d));
    CUDA_OK(cudaMallocHost((void **)&pinned, N * sizeof *pinned));
    for (int i = 0; i < N; i++) pinned[i] = 7.0f;
    CUDA_OK(cudaMemcpy(d, pinned, N * sizeof *d, cudaMemcpyHostToDevice));
    for (int i = 0; i < N; i++) pinned[i] = (float)(rank + 1);
    cudaStream_t copy, coll;
    cudaEvent_t uploaded;
    CUDA_OK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&coll, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
    if (same_stream) coll = copy;
    CUDA_OK(cudaMemcpyAsync(d, pinned, N * sizeof *d, cudaMemcpyHostToDevice, copy));
    if (wait) {
        CUDA_OK(cudaEventRecord(uploaded, copy));
        CUDA_OK(cudaStreamWaitEvent(coll, uploaded, 0));
    }
    NCCL_OK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, coll));
    *out_before_sync = peek(d, 0);
    CUDA_OK(cudaStreamSynchronize(coll));
    *out_after = peek(d, 0);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(pinned));
    NCCL_OK(ncclCommDestroy(c));
}

static void stream_order_body(int rank, int nranks)
{
    float before, after;
    upload_then_reduce(rank, nranks, 1, 0, &before, &after);
    CHECK(after == 3.0f, "the collective gave %g: it did not see the upload queued before it (1 + 2 = 3)", after);
    if (deferred())
        CHECK(before == 7.0f, "before the stream was forced d holds %g, not 7: it ran at the call", before);
    else
        CHECK(before == 3.0f, "in sync mode the collective runs at the call; d holds %g", before);
}

static void missing_wait_body(int rank, int nranks)
{
    float before, after;
    upload_then_reduce(rank, nranks, 0, 0, &before, &after);
    CHECK(after == 14.0f, "without a wait the collective should reduce the stale 7s (14), got %g", after);
}

static void missing_wait_twin_body(int rank, int nranks)
{
    float before, after;
    upload_then_reduce(rank, nranks, 0, 1, &before, &after);
    CHECK(after == 3.0f, "with the event wait the collective should see the upload (3), got %g", after);
}

static void destroy_flushes_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    float h[N];
    for (int i = 0; i < N; i++) h[i] = (float)rank;
    float *d = dev_copy(h, sizeof h);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    NCCL_OK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s));
    NCCL_OK(ncclCommDestroy(c));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK(peek(d, 0) == 1.0f, "the collective queued before ncclCommDestroy gave %g, not 1", peek(d, 0));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
}

/* ------------------------------------------------------------ faults */

/* rank 0 all-reduces on a stream and synchronises, which must fail with want_async and a last
 * error holding both texts; returns the seconds that took */
static double reduce_alone(ncclComm_t c, ncclResult_t want_async, const char *text, const char *text2)
{
    float h[N];
    for (int i = 0; i < N; i++) h[i] = 1.0f;
    float *d = dev_copy(h, sizeof h);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const double t0 = now_s();
    NCCL_OK(ncclAllReduce(d, d, N, ncclFloat32, ncclAvg, c, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const double took = now_s() - t0;
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(c, &async));
    CHECK(async == want_async, "async error %d, expected %d", (int)async, (int)want_async);
    LAST_ERROR_HAS(text);
    LAST_ERROR_HAS(text2);
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(all_bytes(h, sizeof h, 0xff), "a failed collective's output is not all 0xff bytes (NaN): %g", h[0]);
    /* the communicator is in error state: the next call says so */
    NCCL_IS(want_async, ncclAllReduce(d, d, N, ncclFloat32, ncclAvg, c, s));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
    return took;
}

static void timeout_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    if (rank == 1) {
        sleep(3); /* hangs, as far as rank 0 can tell, longer than CUDACPU_NCCL_TIMEOUT=1 */
        NCCL_OK(ncclCommDestroy(c));
        return;
    }
    const double took = reduce_alone(c, ncclRemoteError, "rank 1 did not reach collective 1", "CUDACPU_NCCL_TIMEOUT");
    CHECK(took >= 0.9 && took < 2.5, "the wait took %.2f s with a timeout of 1 s", took);
    NCCL_OK(ncclCommAbort(c));
}

static void peer_exit_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    if (rank == 1) _exit(0); /* gone without a word (the parent reaps it only later: a zombie) */
    const double took = reduce_alone(c, ncclRemoteError, "rank 1 (process", "has exited");
    CHECK(took < 5.0, "noticed after %.2f s; the timeout is 30 s", took);
    NCCL_OK(ncclCommAbort(c));
}

static void peer_abort_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    if (rank == 1) {
        NCCL_OK(ncclCommAbort(c));
        sleep(3); /* alive: only the abort can tell rank 0 */
        return;
    }
    const double took = reduce_alone(c, ncclRemoteError, "rank 1 called ncclCommAbort", "cannot complete");
    CHECK(took < 2.5, "noticed after %.2f s; the timeout is 30 s", took);
    NCCL_OK(ncclCommAbort(c));
}

static void *abort_later(void *arg)
{
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    ncclCommAbort((ncclComm_t)arg);
    return NULL;
}

static void abort_unblocks_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    if (rank == 1) {
        sleep(3); /* never arrives while rank 0 waits */
        NCCL_OK(ncclCommDestroy(c));
        return;
    }
    float h[N];
    for (int i = 0; i < N; i++) h[i] = 1.0f;
    float *d = dev_copy(h, sizeof h);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, abort_later, c) == 0, "pthread_create");
    const double t0 = now_s();
    NCCL_OK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s)); /* sync mode: blocks here */
    CUDA_OK(cudaStreamSynchronize(s));                           /* deferred mode: here */
    const double took = now_s() - t0;
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    CHECK(took < 2.0, "the blocked collective ended %.2f s after it began; ncclCommAbort came at 0.3 s", took);
    LAST_ERROR_HAS("cut short by ncclCommAbort");
    CHECK(all_bytes(d, sizeof h, 0xff), "the aborted collective's output is not all 0xff bytes (NaN): %g", peek(d, 0));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
}

static void mismatch_body(int rank, int nranks)
{
    ncclComm_t c = join(rank, nranks);
    float h[12] = {0};
    float *d = dev_copy(h, sizeof h);
    NCCL_OK(ncclAllReduce(d, d, rank ? 12 : 10, ncclFloat32, ncclSum, c, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(c, &async));
    CHECK(async == ncclInvalidUsage, "async error %d, expected ncclInvalidUsage", (int)async);
    LAST_ERROR_HAS("the ranks call different collectives");
    NCCL_OK(ncclCommAbort(c));
    CUDA_OK(cudaFree(d));
}

/* ------------------------------------------------------------ checks at the calls */

static void missing_rank_body(int rank, int nranks)
{
    (void)nranks;
    if (rank == 1) return; /* never calls ncclCommInitRank */
    ncclComm_t c = (ncclComm_t)&c;
    const double t0 = now_s();
    NCCL_IS(ncclRemoteError, ncclCommInitRank(&c, 2, the_id, 0));
    CHECK(c == NULL, "a failed ncclCommInitRank left a communicator");
    CHECK(now_s() - t0 < 3.0, "the failed init took %.2f s with a timeout of 1 s", now_s() - t0);
    LAST_ERROR_HAS("rank 1 did not join ncclCommInitRank");
    char name[80];
    snprintf(name, sizeof name, "/dev/shm/cudacpu-nccl-");
    for (int i = 16; i < 32; i++) snprintf(name + strlen(name), 3, "%02x", (unsigned char)the_id.internal[i]);
    struct stat st;
    CHECK(stat(name, &st) != 0, "%s is left behind by the failed init", name);
}

static void duplicate_device_body(int rank, int nranks)
{
    CUDA_OK(cudaSetDevice(0));
    ncclComm_t c = NULL;
    NCCL_IS(ncclInvalidUsage, ncclCommInitRank(&c, nranks, the_id, rank));
    LAST_ERROR_HAS("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 0");
}

static void case_init_checks(void)
{
    ncclUniqueId zero;
    memset(&zero, 0, sizeof zero);
    ncclComm_t c = NULL;
    NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&c, 2, zero, 0));
    LAST_ERROR_HAS("was rank 0's id broadcast to this rank?");
    NCCL_OK(ncclGetUniqueId(&the_id));
    NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&c, 2, the_id, 2));
    NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&c, 0, the_id, 0));
    NCCL_IS(ncclInvalidArgument, ncclCommInitRank(NULL, 1, the_id, 0));
    int v = 0;
    NCCL_OK(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION_CODE, "version %d", v);
    run_ranks(2, duplicate_device_body);
}

static void case_call_checks(void)
{
    ncclComm_t c = NULL;
    NCCL_OK(ncclGetUniqueId(&the_id));
    NCCL_OK(ncclCommInitRank(&c, 1, the_id, 0)); /* one rank: every collective is local */
    float *d = NULL;
    CUDA_OK(cudaMalloc((void **)&d, N * sizeof *d));
    CUDA_OK(cudaMemset(d, 0, N * sizeof *d));
    NCCL_IS(ncclInvalidArgument, ncclAllReduce(d, d, N, ncclFloat8e4m3, ncclSum, c, NULL));
    LAST_ERROR_HAS("not modelled");
    NCCL_IS(ncclInvalidArgument, ncclAllReduce(d, d, N, (ncclDataType_t)12, ncclSum, c, NULL));
    NCCL_IS(ncclInvalidArgument, ncclAllReduce(d, d, N, ncclFloat32, ncclNumOps, c, NULL));
    NCCL_IS(ncclInvalidArgument, ncclAllReduce(d, d, N, ncclFloat32, ncclSum, NULL, NULL));
    NCCL_IS(ncclInvalidArgument, ncclAllReduce(NULL, d, N, ncclFloat32, ncclSum, c, NULL));
    NCCL_IS(ncclInvalidUsage, ncclGroupEnd());
    /* a failed call inside a group: ncclGroupEnd returns its error and runs nothing */
    float one[N];
    for (int i = 0; i < N; i++) one[i] = 1.0f;
    float *e = dev_copy(one, sizeof one);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(e, d, N, ncclFloat32, ncclSum, c, NULL));
    NCCL_IS(ncclInvalidArgument, ncclAllReduce(d, d, N, ncclFloat32, (ncclRedOp_t)9, c, NULL));
    NCCL_IS(ncclInvalidArgument, ncclGroupEnd());
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(peek(d, 0) == 0.0f, "a collective of a failed group ran (d[0] = %g)", peek(d, 0));
    /* one rank: ncclAvg is the identity, nested groups launch at the outermost end */
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(e, d, N, ncclFloat32, ncclAvg, c, NULL));
    NCCL_OK(ncclGroupEnd());
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(peek(d, 0) == 1.0f, "a one-rank ncclAvg gave %g", peek(d, 0));
    /* several streams in one group: not modelled, refused */
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(e, d, N, ncclFloat32, ncclSum, c, NULL));
    NCCL_OK(ncclAllReduce(e, d, N, ncclFloat32, ncclSum, c, s));
    NCCL_IS(ncclInvalidUsage, ncclGroupEnd());
    CUDA_OK(cudaStreamDestroy(s));
    NCCL_OK(ncclCommDestroy(c));
    NCCL_IS(ncclSuccess, ncclCommDestroy(NULL));
    NCCL_IS(ncclSuccess, ncclCommAbort(NULL));
    CHECK(!strcmp(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error"),
          "ncclGetErrorString(ncclRemoteError): %s", ncclGetErrorString(ncclRemoteError));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFree(e));
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"values", on_ranks<2, values_body, true>},
        {"rank_order", on_ranks<3, rank_order_body, true>},
        {"group_chunks", on_ranks<2, group_chunks_body>},
        {"stream_order", on_ranks<2, stream_order_body>},
        {"missing_wait", on_ranks<2, missing_wait_body>},
        {"missing_wait_twin", on_ranks<2, missing_wait_twin_body>},
        {"destroy_flushes", on_ranks<2, destroy_flushes_body>},
        {"timeout", on_ranks<2, timeout_body>},
        {"peer_exit", on_ranks<2, peer_exit_body>},
        {"peer_abort", on_ranks<2, peer_abort_body>},
        {"abort_unblocks", on_ranks<2, abort_unblocks_body>},
        {"mismatch", on_ranks<2, mismatch_body>},
        {"init_missing_rank", on_ranks<2, missing_rank_body>},
        {"init_checks", case_init_checks},
        {"call_checks", case_call_checks},
    };
    return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
