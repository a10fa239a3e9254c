/* test_cuda_copy.c — core/cuda_device/cuda_copy.c itself, its CUDA half, run on the CPU against
 * tests/c/fake_cuda_runtime.h: a runtime whose copies and memsets wait in their stream's
 * queue until a sync point, with two fake devices whose "memory" is host memory. What it
 * shows without a GPU: the chunking (direct below 1 MiB; 8 MiB staged chunks, partial last
 * chunk, every dtype pair converted as tr_convert does), the double buffering (a staging
 * buffer is never refilled before the queued copy that reads it has run), the sync points
 * (host transfers are complete on return; device-to-device copies and fills are only
 * queued, and a later transfer on the stream sees them), the events between two devices'
 * streams, fill of every dtype bit-identical to the CPU's, error messages that name the
 * function, direction and device and leave no copy pending, and the caller's current
 * device restored. It shows nothing about the real runtime's behaviour: tests/gpu does. */
#define TR_HAVE_CUDA 1
#define TR_CUDA_COPY_TEST_RUNTIME "fake_cuda_runtime.h"
/* The runtime this links may hold cuda_copy.c and the device backend too (a CUDA build): the code under
 * test and the context calls it makes get names of their own here. */
#define tr_cuda_copy fake_tr_cuda_copy
#define tr_cuda_fill fake_tr_cuda_fill
#define tr_cuda_staging_new fake_tr_cuda_staging_new
#define tr_cuda_staging_free fake_tr_cuda_staging_free
#define tr_ctx_cuda_staging fake_ctx_cuda_staging
#define tr_ctx_cuda_state fake_ctx_cuda_state
#define tr_cuda_stream fake_cuda_stream
#include "../../core/cuda_device/cuda_copy.c"

#include "check.h"
#include "ctx_check.h"

#include <stdint.h>

/* ------------------------------------------------------------ the fake context */

static tr_cuda_staging *staging;
#include "fake_cuda_context.h"

tr_cuda_staging *fake_ctx_cuda_staging(tr_ctx *ctx)
{
    (void)ctx;
    if (!staging) staging = fake_tr_cuda_staging_new();
    return staging;
}

/* ------------------------------------------------------------ helpers */

#define MiB ((size_t)1 << 20)

static uint64_t seed = 0x243f6a8885a308d3ull;
static unsigned char rnd_byte(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (unsigned char)(seed >> 24);
}

/* n elements of dtype with values every dtype holds (no NaN payload or range questions). */
static void *values_of(int dtype, size_t n)
{
    void *p = malloc((n ? n : 1) * tr_dtype_size(dtype));
    float f;
    for (size_t i = 0; p && i < n; i++) {
        int v = (int)(rnd_byte() % 200) - 100;
        switch (dtype) {
        case TR_I32: ((int32_t *)p)[i] = v * 1000; break;
        case TR_I64: ((int64_t *)p)[i] = (int64_t)v * 1000; break;
        default:
            f = (float)v / 8.0f;
            tr_convert((char *)p + i * tr_dtype_size(dtype), dtype, &f, TR_F32, 1);
            break;
        }
    }
    return p;
}

static tr_ctx *ctx;

/* ------------------------------------------------------------ cases */

static const size_t counts[] = { 1, 1000, 262144, 262145, 2097152 + 3, 5 * 1048576 + 7 };

static void test_host_device_round_trips(void)
{
    for (int dt = 0; dt < TR_NDTYPES; dt++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t n = counts[c], bytes = n * tr_dtype_size(dt);
            unsigned char *host = values_of(dt, n), *dev = malloc(bytes), *back = malloc(bytes);
            if (!host || !dev || !back) abort();
            memset(dev, 0xEE, bytes);
            CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_write", dev, 0, dt, host, TR_CPU, dt, n) == TR_OK, "%s",
                  tr_ctx_errmsg(ctx));
            CHECK(fake_idle(), "an upload is still queued after it returned");
            CHECK(memcmp(dev, host, bytes) == 0, "%s x %zu: upload differs", tr_dtype_name(dt), n);
            memset(back, 0, bytes);
            CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_read", back, TR_CPU, dt, dev, 0, dt, n) == TR_OK, "%s",
                  tr_ctx_errmsg(ctx));
            CHECK(fake_idle() && memcmp(back, host, bytes) == 0, "%s x %zu: download differs", tr_dtype_name(dt), n);
            free(host);
            free(dev);
            free(back);
        }
}

static const int pairs[][2] = {
    { TR_F32, TR_BF16 }, { TR_BF16, TR_F32 }, { TR_F32, TR_F16 }, { TR_F16, TR_F32 }, { TR_BF16, TR_F16 },
    { TR_I64, TR_I32 },  { TR_I32, TR_I64 },  { TR_I32, TR_F32 }, { TR_F32, TR_I64 },
};

static void test_converting_copies(void)
{
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c += 2) {
            int from = pairs[p][0], to = pairs[p][1];
            size_t n = counts[c], tb = n * tr_dtype_size(to);
            void *src = values_of(from, n), *ref = malloc(tb), *dev = malloc(tb), *dsrc = malloc(n * tr_dtype_size(from));
            void *dev1 = malloc(tb), *down = malloc(tb);
            if (!src || !ref || !dev || !dsrc || !dev1 || !down) abort();
            tr_convert(ref, to, src, from, n);
            /* up, converting on the way */
            CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_copy", dev, 0, to, src, TR_CPU, from, n) == TR_OK, "%s",
                  tr_ctx_errmsg(ctx));
            CHECK(fake_idle() && memcmp(dev, ref, tb) == 0, "%s -> %s x %zu up", tr_dtype_name(from), tr_dtype_name(to), n);
            /* down, converting on the way */
            memcpy(dsrc, src, n * tr_dtype_size(from));
            CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_copy", down, TR_CPU, to, dsrc, 0, from, n) == TR_OK, "%s",
                  tr_ctx_errmsg(ctx));
            CHECK(fake_idle() && memcmp(down, ref, tb) == 0, "%s -> %s x %zu down", tr_dtype_name(from),
                  tr_dtype_name(to), n);
            /* cuda:0 -> cuda:1 with a dtype change (through the host) */
            memset(dev1, 0, tb);
            CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_copy", dev1, 1, to, dsrc, 0, from, n) == TR_OK, "%s",
                  tr_ctx_errmsg(ctx));
            CHECK(fake_idle() && memcmp(dev1, ref, tb) == 0, "%s -> %s x %zu across devices", tr_dtype_name(from),
                  tr_dtype_name(to), n);
            free(src);
            free(ref);
            free(dev);
            free(dsrc);
            free(dev1);
            free(down);
        }
}

static void test_device_to_device_is_queued_and_ordered(void)
{
    size_t n = 3 * MiB + 1;
    unsigned char *a = malloc(n), *b = malloc(n), *c = malloc(n), *out = malloc(n);
    if (!a || !b || !c || !out) abort();
    memset(a, 1, n);
    memset(b, 0, n);
    memset(c, 0, n);
    /* fill a with 7s on cuda:0 (queued), copy a -> b on cuda:0 (queued): nothing has happened */
    unsigned char seven = 7;
    CHECK(fake_tr_cuda_fill(ctx, "tr_tensor_fill", a, 0, &seven, 1, n) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_copy", b, 0, TR_F32, a, 0, TR_F32, n / 4) == TR_OK, "%s",
          tr_ctx_errmsg(ctx));
    CHECK(!fake_idle() && a[0] == 1 && b[0] == 0, "device work ran before a sync point");
    /* cuda:0 -> cuda:1: the copy waits for cuda:0's fill; then a read of cuda:1 sees 7s */
    CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_copy", c, 1, TR_F32, a, 0, TR_F32, n / 4) == TR_OK, "%s",
          tr_ctx_errmsg(ctx));
    CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_read", out, TR_CPU, TR_F32, c, 1, TR_F32, n / 4) == TR_OK, "%s",
          tr_ctx_errmsg(ctx));
    size_t bad = 0;
    for (size_t i = 0; i < (n / 4) * 4; i++) bad += out[i] != 7;
    CHECK(bad == 0, "cuda:1 read %zu bytes that were not the 7s queued on cuda:0 before", bad);
    /* and cuda:0's later work waits for the copy: its stream holds a wait on cuda:1's record */
    int waits = 0;
    for (long i = fake_streams[0].head; i < fake_streams[0].tail; i++)
        waits += fake_streams[0].q[i % FAKE_QUEUE].kind == 3;
    CHECK(waits == 1, "cuda:0's stream has %d waits for the cross-device copy", waits);
    CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_read", out, TR_CPU, TR_F32, b, 0, TR_F32, n / 4) == TR_OK, "%s",
          tr_ctx_errmsg(ctx));
    bad = 0;
    for (size_t i = 0; i < (n / 4) * 4; i++) bad += out[i] != 7;
    CHECK(bad == 0 && fake_idle(), "the queued cuda:0 copy was not seen by the read after it");
    free(a);
    free(b);
    free(c);
    free(out);
}

static void test_fill_every_dtype(void)
{
    static const double vals[] = { 0.0, 1.0, -2.5, 3.140625, 65504.0, -1e30 };
    static const size_t ns[] = { 1, 2, 3, 1000, 1048577 };
    for (int dt = 0; dt < TR_NDTYPES; dt++)
        for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                size_t n = ns[k], es = tr_dtype_size(dt);
                unsigned char elem[8] = { 0 };
                double x = vals[v];
                if (dt == TR_I32 || dt == TR_I64) {
                    if (x < -1e9) continue;
                    int64_t i = (int64_t)x;
                    if (dt == TR_I32) {
                        int32_t j = (int32_t)i;
                        memcpy(elem, &j, 4);
                    } else {
                        memcpy(elem, &i, 8);
                    }
                } else {
                    float f = (float)x;
                    tr_convert(elem, dt, &f, TR_F32, 1);
                }
                unsigned char *dev = malloc(n * es), *ref = malloc(n * es);
                if (!dev || !ref) abort();
                memset(dev, 0xCD, n * es);
                for (size_t i = 0; i < n; i++) memcpy(ref + i * es, elem, es);
                CHECK(fake_tr_cuda_fill(ctx, "tr_tensor_fill", dev, 0, elem, es, n) == TR_OK, "%s", tr_ctx_errmsg(ctx));
                fake_run_until(&fake_streams[0], -1);
                CHECK(memcmp(dev, ref, n * es) == 0, "fill %s x %zu with %g", tr_dtype_name(dt), n, x);
                free(dev);
                free(ref);
            }
}

static void test_errors_name_call_and_device(void)
{
    size_t n = 5 * MiB;   /* f32: 20 MiB, three staged chunks */
    float *host = values_of(TR_F32, n), *dev = malloc(n * 4);
    if (!host || !dev) abort();
    fake_current = 1;   /* the caller's current device, which every path restores */
    for (long at = 1; at <= 12; at++) {
        long start = fake_calls;
        fake_fail_at = start + at;
        int rc = fake_tr_cuda_copy(ctx, "tr_tensor_copy", dev, 0, TR_F32, host, TR_CPU, TR_F32, n);
        fake_fail_at = 0;
        if (fake_calls < start + at) {
            CHECK(rc == TR_OK, "no call failed but rc %d", rc);
            break;
        }
        CHECK(rc == TR_EINTERNAL, "call %ld failed, rc %d", at, rc);
        CHECK(strstr(tr_ctx_errmsg(ctx), "tr_tensor_copy to cuda:0: fake failure (cudaErrorFake; `") != NULL,
              "call %ld: %s", at, tr_ctx_errmsg(ctx));
        CHECK(fake_idle(), "call %ld failed and left a copy queued (it could read the staging later)", at);
        fake_run_until(&fake_streams[0], -1);
        CHECK(fake_current == 1, "call %ld: the current device is %d, not the caller's 1", at, fake_current);
    }
    fake_fail_with = cudaErrorMemoryAllocation;
    fake_fail_at = fake_calls + 2;
    CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_read", host, TR_CPU, TR_F32, dev, 0, TR_F32, 16) == TR_EOOM &&
              strstr(tr_ctx_errmsg(ctx), "tr_tensor_read from cuda:0: out of memory"),
          "oom: %s", tr_ctx_errmsg(ctx));
    fake_fail_at = 0;
    fake_fail_with = cudaErrorInvalidValue;
    static const unsigned char elem[4] = { 1, 2, 3, 4 };   /* unlike bytes: a memset per byte */
    fake_fail_at = fake_calls + 2;
    CHECK(fake_tr_cuda_fill(ctx, "tr_tensor_fill", dev, 0, elem, 4, 4) == TR_EINTERNAL &&
              strstr(tr_ctx_errmsg(ctx), "tr_tensor_fill on cuda:0: "),
          "fill: %s", tr_ctx_errmsg(ctx));
    fake_fail_at = 0;
    CHECK(fake_tr_cuda_copy(ctx, "tr_tensor_copy", dev, 5, TR_F32, host, TR_CPU, TR_F32, 4) != TR_OK &&
              strstr(tr_ctx_errmsg(ctx), "tr_tensor_copy to cuda:5"),
          "no such device: %s", tr_ctx_errmsg(ctx));
    fake_run_until(&fake_streams[0], -1);
    fake_run_until(&fake_streams[1], -1);
    fake_current = 0;
    free(host);
    free(dev);
}

static void test_staging_freed(void)
{
    CHECK(staging && staging->pinned && fake_host_allocs == 2, "two pinned buffers expected, %ld live",
          fake_host_allocs);
    fake_tr_cuda_staging_free(staging);
    staging = NULL;
    CHECK(fake_host_allocs == 0, "%ld pinned buffers not freed", fake_host_allocs);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_host_device_round_trips), CASE(test_converting_copies),
        CASE(test_device_to_device_is_queued_and_ordered), CASE(test_fill_every_dtype),
        CASE(test_errors_name_call_and_device), CASE(test_staging_freed)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
