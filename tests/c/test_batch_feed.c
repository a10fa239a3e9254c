/* test_batch_feed.c — core/cuda_device/batch_feed.c, its CUDA half, run on the CPU against
 * tests/c/fake_cuda_runtime.h (copies wait in their stream's queue until a sync point, so a
 * missing wait or a host buffer rewritten too early gives wrong bytes), and its CPU
 * stand-in. What it shows without a GPU: the order of the calls of one batch (copy stream:
 * wait for the slot's release, copies, record; compute stream: wait for the record; no host
 * wait), that batch n + 1 is uploaded while batch n's "kernels" are still queued, that a
 * slot's host buffer is rewritten only after the upload that read it has run, that an
 * upload into a slot waits for the compute stream's reads of its previous batch, growth
 * (views of the old buffer stay valid), a slot never released (the step failed) released at
 * its next begin, errors that name the function and device and leave no copy queued, and
 * everything freed, and the build without CUDA (its stand-in works, a device is refused with
 * a message). It shows nothing about the real runtime: tests/gpu does. A "kernel"
 * here is a device-to-host copy queued on the compute stream: it reads the device buffer
 * when that stream runs, as a kernel would. */
#define TR_HAVE_CUDA 1
#define TR_BATCH_FEED_TEST_RUNTIME "fake_cuda_runtime.h"
/* The ASan runtime links batch_feed.c's CUDA-less build and ctx.c's CUDA-less context: the
 * code under test and the calls it makes get names of their own here. */
#define tr_batch_feed_new fake_tr_batch_feed_new
#define tr_batch_feed_free fake_tr_batch_feed_free
#define tr_batch_feed_begin fake_tr_batch_feed_begin
#define tr_batch_feed_upload fake_tr_batch_feed_upload
#define tr_batch_feed_release fake_tr_batch_feed_release
#define tr_batch_feed_slot fake_tr_batch_feed_slot
#define tr_batch_feed_pinned fake_tr_batch_feed_pinned
#define tr_ctx_cuda_state fake_ctx_cuda_state
#define tr_cuda_stream fake_cuda_stream
#define tr_tensor_new fake_tensor_new
#include "../../core/cuda_device/batch_feed.c"
#undef tr_tensor_new
#undef tr_batch_feed_new
#undef tr_batch_feed_free
#undef tr_batch_feed_begin
#undef tr_batch_feed_upload
/* the real ones (this build's, without CUDA), which the headers declared under the fakes' names */
tr_tensor *tr_tensor_new(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int device, int tag);
tr_batch_feed *tr_batch_feed_new(tr_ctx *ctx, int device);
void tr_batch_feed_free(tr_batch_feed *f);
int tr_batch_feed_begin(tr_batch_feed *f, int64_t n32, int64_t n64, int32_t **host32, int64_t **host64);
int tr_batch_feed_upload(tr_batch_feed *f, tr_tensor **dev32, tr_tensor **dev64);

#include "check.h"
#include "ctx_check.h"

/* ------------------------------------------------------------ the fake context */

#include "fake_cuda_context.h"

/* "Device" tensors: host memory that says it is on the device. */
static long fake_tensors_made;
tr_tensor *fake_tensor_new(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int device, int tag)
{
    tr_tensor *t = tr_tensor_new(ctx, ndim, shape, dtype, TR_CPU, tag);
    if (t) {
        memset(t->data, 0xEE, tr_tensor_nbytes(t));
        t->device = device;
        fake_tensors_made++;
    }
    return t;
}

/* ------------------------------------------------------------ helpers */

static tr_ctx *ctx;
static cudaStream_t compute = &fake_streams[0];

/* Fills a batch's host buffers with values derived from `mark`. */
static void fill(int32_t *h32, int64_t n32, int64_t *h64, int64_t n64, int mark)
{
    for (int64_t i = 0; i < n32; i++) h32[i] = mark * 1000 + (int32_t)i;
    for (int64_t i = 0; i < n64; i++) h64[i] = (int64_t)mark * 100000 + i;
}

static int holds(const int32_t *v32, int64_t n32, const int64_t *v64, int64_t n64, int mark)
{
    for (int64_t i = 0; i < n32; i++)
        if (v32[i] != mark * 1000 + (int32_t)i) return 0;
    for (int64_t i = 0; i < n64; i++)
        if (v64[i] != (int64_t)mark * 100000 + i) return 0;
    return 1;
}

/* A "kernel" of the step: reads the device buffers on the compute stream into seen. */
static void kernel_reads(tr_tensor *d32, int64_t n32, tr_tensor *d64, int64_t n64, int32_t *seen32, int64_t *seen64)
{
    CHECK(cudaMemcpyAsync(seen32, d32->data, (size_t)n32 * 4, cudaMemcpyDeviceToHost, compute) == cudaSuccess, "kernel");
    CHECK(cudaMemcpyAsync(seen64, d64->data, (size_t)n64 * 8, cudaMemcpyDeviceToHost, compute) == cudaSuccess, "kernel");
}

/* Stream numbers of the trace: s0 the compute stream, s1 the feed's copy stream. */
static void number_streams(tr_batch_feed *f)
{
    memset(fake_ids, 0, sizeof fake_ids);
    (void)fake_stream_id(compute);
    (void)fake_stream_id(f->copy);
}

/* A new feed on cuda:0 with its streams numbered; NULL (a failed CHECK) when it cannot be made. */
static tr_batch_feed *new_feed(void)
{
    tr_batch_feed *f = fake_tr_batch_feed_new(ctx, 0);
    CHECK(f != NULL, "%s", tr_ctx_errmsg(ctx));
    if (f) number_streams(f);
    return f;
}

static int pending(cudaStream_t s) { return s->head != s->tail; }

static void drain(tr_batch_feed *f)
{
    fake_run_until(f->copy, -1);
    fake_run_until(compute, -1);
}

/* ------------------------------------------------------------ cases */

static void test_one_batch_call_order(void)
{
    tr_batch_feed *f = fake_tr_batch_feed_new(ctx, 0);
    CHECK(f != NULL, "%s", tr_ctx_errmsg(ctx));
    if (!f) return;
    number_streams(f);
    CHECK(f->copy != compute && f->copy != &fake_streams[1], "the feed has a copy stream of its own");
    int32_t *h32;
    int64_t *h64;
    fake_trace_clear();
    CHECK(fake_tr_batch_feed_begin(f, 24, 4, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(fake_tr_batch_feed_pinned(f) == 1 && fake_host_allocs == 1, "the host buffer is pinned");
    fill(h32, 24, h64, 4, 1);
    tr_tensor *d32, *d64;
    CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(d32->numel >= 24 && d64->numel >= 4 && d32->dtype == TR_I32 && d64->dtype == TR_I64, "buffer shapes");
    int32_t seen32[24];
    int64_t seen64[4];
    kernel_reads(d32, 24, d64, 4, seen32, seen64);
    CHECK(fake_tr_batch_feed_release(f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    /* new buffers: released recorded at once (a fresh block may still be read by queued work);
     * then the copy stream waits for it, copies, records; the compute stream waits for that */
    const char *want = "record@s0 wait@s1<s0 copy@s1 copy@s1 record@s1 wait@s0<s1 copy@s0 copy@s0 record@s0";
    CHECK(strcmp(fake_trace, want) == 0, "calls: %s\n  expected: %s", fake_trace, want);
    CHECK(strstr(fake_trace, "hostwait") == NULL, "a batch's upload waited on the host");
    CHECK(pending(f->copy) && pending(compute), "the upload ran before a sync point");
    /* the compute stream's kernel sees the batch: its wait runs the copy stream first */
    fake_run_until(compute, -1);
    CHECK(holds(seen32, 24, seen64, 4, 1), "the kernel read the device buffer before the upload landed");
    fake_tr_batch_feed_free(f);
    CHECK(fake_host_allocs == 0 && fake_live_streams == 0, "%ld pinned buffers, %ld streams left", fake_host_allocs,
          fake_live_streams);
    CHECK(fake_idle(), "work left queued after free");
}

static void test_double_buffering_overlaps_and_protects(void)
{
    tr_batch_feed *f = new_feed();
    if (!f) return;
    enum { N32 = 3000, N64 = 16, BATCHES = 6 };
    static int32_t seen32[BATCHES][N32];
    static int64_t seen64[BATCHES][N64];
    int32_t *h32;
    int64_t *h64;
    tr_tensor *d32, *d64;
    void *host_of[2] = { NULL, NULL };
    for (int n = 0; n < BATCHES; n++) {
        fake_trace_clear();
        CHECK(fake_tr_batch_feed_begin(f, N32, N64, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        int b = fake_tr_batch_feed_slot(f);
        CHECK(b == n % 2, "batch %d in slot %d", n, b);
        if (n < 2) host_of[b] = h64;
        CHECK(host_of[b] == (void *)h64, "slot %d's host buffer moved", b);
        if (n >= 2) {
            /* the slot's host buffer is handed out only after the upload that read it ran */
            CHECK(strstr(fake_trace, "hostwait@s1") != NULL, "batch %d: no wait for slot %d's last upload: %s", n, b,
                  fake_trace);
            CHECK(f->copy->done_seq >= f->slot[b].uploaded->seq, "batch %d: slot %d's upload has not run", n, b);
        } else {
            CHECK(strstr(fake_trace, "hostwait") == NULL, "batch %d: a fresh slot waited: %s", n, fake_trace);
        }
        fill(h32, N32, h64, N64, n + 1);
        fake_trace_clear();
        CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        /* the upload of a reused slot waits for the compute stream's reads of its last batch */
        if (n >= 2)
            CHECK(strcmp(fake_trace, "wait@s1<s0 copy@s1 copy@s1 record@s1 wait@s0<s1") == 0, "batch %d: %s", n,
                  fake_trace);
        kernel_reads(d32, N32, d64, N64, seen32[n], seen64[n]);
        CHECK(fake_tr_batch_feed_release(f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        /* batch n + 1 is prepared while batch n's kernels are still queued */
        CHECK(pending(compute), "batch %d: the compute stream was drained by the feed", n);
    }
    /* the strictest order the real runtime allows: the copy stream first (a missing wait
     * would land a later batch under an earlier batch's kernels), then the compute stream */
    drain(f);
    for (int n = 0; n < BATCHES; n++)
        CHECK(holds(seen32[n], N32, seen64[n], N64, n + 1), "batch %d's kernels read other bytes", n + 1);
    fake_tr_batch_feed_free(f);
    CHECK(fake_idle() && fake_host_allocs == 0 && fake_live_streams == 0, "left behind");
}

static void test_growth_keeps_views(void)
{
    tr_batch_feed *f = new_feed();
    if (!f) return;
    int32_t *h32;
    int64_t *h64;
    tr_tensor *d32, *d64;
    CHECK(fake_tr_batch_feed_begin(f, 100, 0, &h32, &h64) == TR_OK && h64 == NULL, "%s", tr_ctx_errmsg(ctx));
    fill(h32, 100, NULL, 0, 7);
    CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    tr_tensor *view = tr_tensor_narrow(ctx, d32, 0, 100);
    CHECK(view != NULL, "%s", tr_ctx_errmsg(ctx));
    CHECK(fake_tr_batch_feed_release(f) == TR_OK, "release");
    drain(f);
    /* slot 1, then slot 0 again with a batch longer than its capacity */
    for (int k = 0; k < 2; k++) {
        CHECK(fake_tr_batch_feed_begin(f, 20000, 3, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        fill(h32, 20000, h64, 3, 8 + k);
        fake_trace_clear();
        CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(d32->numel >= 20000, "slot %d did not grow: %lld", fake_tr_batch_feed_slot(f), (long long)d32->numel);
        CHECK(strncmp(fake_trace, "wait@s1<s0", 10) == 0, "a grown buffer's upload does not wait: %s", fake_trace);
        CHECK(fake_tr_batch_feed_release(f) == TR_OK, "release");
    }
    drain(f);
    CHECK(holds((const int32_t *)view->data, 100, NULL, 0, 7), "the old buffer's view changed");
    CHECK(holds((const int32_t *)d32->data, 20000, NULL, 0, 9), "the grown buffer holds other bytes");
    tr_tensor_free(view);
    fake_tr_batch_feed_free(f);
    CHECK(fake_idle() && fake_host_allocs == 0, "left behind");
}

static void test_unreleased_slot_released_at_begin(void)
{
    tr_batch_feed *f = new_feed();
    if (!f) return;
    int32_t *h32;
    int64_t *h64;
    tr_tensor *d32, *d64;
    for (int n = 0; n < 2; n++) {
        CHECK(fake_tr_batch_feed_begin(f, 10, 1, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        fill(h32, 10, h64, 1, n + 1);
        CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        if (n == 1) CHECK(fake_tr_batch_feed_release(f) == TR_OK, "release");
        /* batch 1 (slot 0) is never released: its step "failed" */
    }
    fake_trace_clear();
    CHECK(fake_tr_batch_feed_begin(f, 10, 1, &h32, &h64) == TR_OK && fake_tr_batch_feed_slot(f) == 0, "%s",
          tr_ctx_errmsg(ctx));
    CHECK(strstr(fake_trace, "record@s0") != NULL, "slot 0 was reused without a release point: %s", fake_trace);
    drain(f);
    fake_tr_batch_feed_free(f);
    CHECK(fake_idle() && fake_host_allocs == 0, "left behind");
}

static void test_errors_name_call_and_device(void)
{
    int32_t *h32;
    int64_t *h64;
    tr_tensor *d32, *d64;
    /* creation: every call of it failing in turn */
    for (long at = 1; at <= 5; at++) {
        fake_fail_at = fake_calls + at;
        tr_batch_feed *f = fake_tr_batch_feed_new(ctx, 0);
        fake_fail_at = 0;
        CHECK(f == NULL && strstr(tr_ctx_errmsg(ctx), "tr_batch_feed_new on cuda:0: fake failure (cudaErrorFake; `"),
              "call %ld: %s", at, tr_ctx_errmsg(ctx));
        fake_tr_batch_feed_free(f);
    }
    CHECK(fake_live_streams == 0, "a failed creation left %ld streams", fake_live_streams);
    /* upload: every queueing call failing in turn; nothing left queued, the next batch works */
    tr_batch_feed *f = new_feed();
    if (!f) return;
    for (long at = 1; at <= 6; at++) {
        CHECK(fake_tr_batch_feed_begin(f, 50, 2, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        fill(h32, 50, h64, 2, 3);
        long start = fake_calls;
        fake_fail_at = start + at;
        int rc = fake_tr_batch_feed_upload(f, &d32, &d64);
        fake_fail_at = 0;
        if (fake_calls < start + at) {
            CHECK(rc == TR_OK, "no call failed but rc %d", rc);
            fake_tr_batch_feed_release(f);
            break;
        }
        CHECK(rc == TR_EINTERNAL && strstr(tr_ctx_errmsg(ctx), "tr_batch_feed_upload on cuda:0: fake failure "
                                                               "(cudaErrorFake; `"),
              "call %ld: rc %d, %s", at, rc, tr_ctx_errmsg(ctx));
        CHECK(!pending(f->copy), "call %ld failed and left a copy queued that reads the host buffer", at);
        CHECK(fake_tr_batch_feed_release(f) == TR_OK, "release after a failed upload is a no-op");
        fake_run_until(compute, -1);
    }
    /* the host wait of a begin failing: named, status returned */
    CHECK(fake_tr_batch_feed_begin(f, 50, 2, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(fake_tr_batch_feed_begin(f, 50, 2, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    fake_fail_with = cudaErrorMemoryAllocation;
    fake_fail_at = fake_calls + 1;
    int rc = fake_tr_batch_feed_begin(f, 50, 2, &h32, &h64);
    fake_fail_at = 0;
    fake_fail_with = cudaErrorInvalidValue;
    CHECK(rc == TR_EOOM && strstr(tr_ctx_errmsg(ctx), "tr_batch_feed_begin on cuda:0: out of memory"), "rc %d: %s", rc,
          tr_ctx_errmsg(ctx));
    CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "tr_batch_feed_upload: no batch to upload"),
          "upload without a begin: %s", tr_ctx_errmsg(ctx));
    drain(f);
    fake_tr_batch_feed_free(f);
    CHECK(fake_idle() && fake_host_allocs == 0 && fake_live_streams == 0, "left behind");
    CHECK(fake_tr_batch_feed_new(ctx, 5) == NULL && strstr(tr_ctx_errmsg(ctx), "cuda:5 does not exist"),
          "no such device: %s", tr_ctx_errmsg(ctx));
}

static void test_cpu_stand_in(void)
{
    tr_batch_feed *f = fake_tr_batch_feed_new(ctx, TR_CPU);
    if (!f) { CHECK(0, "%s", tr_ctx_errmsg(ctx)); return; }
    number_streams(f);
    long calls = fake_calls, made = fake_tensors_made;
    int32_t *h32;
    int64_t *h64;
    tr_tensor *d32, *d64;
    for (int n = 0; n < 3; n++) {
        CHECK(fake_tr_batch_feed_begin(f, 40, 5, &h32, &h64) == TR_OK && fake_tr_batch_feed_slot(f) == n % 2, "%s",
              tr_ctx_errmsg(ctx));
        fill(h32, 40, h64, 5, n + 4);
        CHECK(fake_tr_batch_feed_upload(f, &d32, &d64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(d32->device == TR_CPU && holds(d32->data, 40, d64->data, 5, n + 4), "batch %d not there on return", n);
        CHECK(fake_tr_batch_feed_release(f) == TR_OK, "release");
    }
    CHECK(fake_calls == calls && fake_tr_batch_feed_pinned(f) == 0, "the CPU stand-in called the CUDA runtime");
    CHECK(fake_tensors_made - made == 4, "%ld buffers for two slots", fake_tensors_made - made);
    fake_tr_batch_feed_free(f);
}

/* The build without CUDA (the one linked here): the CPU stand-in works, a device says why not. */
static void test_build_without_cuda(void)
{
    CHECK(tr_batch_feed_new(ctx, 0) == NULL &&
              strstr(tr_ctx_errmsg(ctx), "tr_batch_feed_new on cuda:0: this build of trainer has no CUDA backend"),
          "%s", tr_ctx_errmsg(ctx));
    tr_batch_feed *f = tr_batch_feed_new(ctx, TR_CPU);
    CHECK(f != NULL, "%s", tr_ctx_errmsg(ctx));
    if (!f) return;
    int32_t *h32;
    int64_t *h64;
    tr_tensor *d32, *d64;
    CHECK(tr_batch_feed_begin(f, 7, 2, &h32, &h64) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    fill(h32, 7, h64, 2, 11);
    CHECK(tr_batch_feed_upload(f, &d32, &d64) == TR_OK && holds(d32->data, 7, d64->data, 2, 11), "%s",
          tr_ctx_errmsg(ctx));
    tr_batch_feed_free(f);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_one_batch_call_order), CASE(test_double_buffering_overlaps_and_protects),
        CASE(test_growth_keeps_views), CASE(test_unreleased_slot_released_at_begin),
        CASE(test_errors_name_call_and_device), CASE(test_cpu_stand_in), CASE(test_build_without_cuda)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
