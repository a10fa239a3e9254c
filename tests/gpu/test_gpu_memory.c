/* test_gpu_memory.c — device memory and tensor transfers on a real GPU, through the public
 * tensor API (core/tensor/tensor.h over core/cuda_device/cuda_copy.c) and a runtime context:
 *   - every dtype cpu -> cuda -> cpu bit for bit, below and above the 1 MiB direct limit and
 *     across several 8 MiB staging chunks (odd element counts);
 *   - converting copies (f32 <-> bf16/f16, i64 <-> i32) host -> device, device -> host and
 *     device -> device, equal to tr_convert on the host bit for bit;
 *   - device -> device on one GPU, and between two when there are two (else SKIP);
 *   - fill of every dtype (zero, values whose bytes differ, a single element, odd counts);
 *   - narrow and reshape views on the device (read through them, write through them);
 *   - a 300 MiB host -> device -> host round trip through the staging (its GB/s printed as
 *     information, never asserted);
 *   - the device allocator under a seeded stress of many sizes (invariants, stats equal the
 *     live blocks, peaks >= current, cached blocks reused without a new segment);
 *   - out of memory (more than the card) is TR_EOOM with the ledger and the device figures,
 *     and the next allocation works; cudaMemGetInfo's figures in the allocator;
 *   - a safetensors file loaded to the device (tr_tensor_write_converted from the mapping,
 *     with and without a dtype change) equal to the host load, and saved back from the
 *     device (tr_st_write_tensors, chunked reads) byte-identical to the host's file.
 * Built by the Makefile's bundle rule (tests/gpu/test_*.c) and by tests/gpu/run.sh; without a
 * visible GPU it prints SKIP and exits 0. One PASS/FAIL line per case, then
 * "N passed, N failed". Before spending a GPU run on a change to this file, check its logic
 * on the CPU (the same cases with the CPU as the device; nothing about CUDA is shown):
 *   make check-asan && gcc $(CFLAGS_ASAN of the Makefile) -Itests/c -DTR_HAVE_CUDA
 *     -I/usr/local/cuda/include -DGPU_MEMORY_DRY_RUN -o /tmp/dry tests/gpu/test_gpu_memory.c
 *     build/asan/core/{*}/{*}.o build/asan/kernels/cpu/{*}.o $(LIBS) && /tmp/dry */
#include "gpu_testutil.h"

#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static tr_ctx *ctx;

/* The device under test. -DGPU_MEMORY_DRY_RUN runs the same cases with DEV = the CPU: a check
 * of this program's own logic on a machine without a GPU (it proves nothing about CUDA); the
 * cases that need a device's figures (out of memory, cross-device) are left out then. */
#ifdef GPU_MEMORY_DRY_RUN
#define DEV TR_CPU
#else
#define DEV 0
#endif

static tr_tensor *new1(int64_t n, int dtype, int device)
{
    int64_t shape[1] = { n };
    tr_tensor *t = tr_tensor_new(ctx, 1, shape, dtype, device, TR_TAG_ACTIVATIONS);
    CHECK(t != NULL, "tr_tensor_new(%lld, %s, %d): %s", (long long)n, tr_dtype_name(dtype), device,
          tr_ctx_errmsg(ctx));
    return t;
}

static unsigned char *random_bytes(size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd_u32();
    return p;
}

/* Random values that convert without saturation questions: floats in [-4, 4), ints small. */
static void *random_values(int dtype, size_t n)
{
    void *p = malloc((n ? n : 1) * tr_dtype_size(dtype));
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) {
        float v = rnd_unit() * 4.0f;
        switch (dtype) {
        case TR_I32: ((int32_t *)p)[i] = (int32_t)(rnd_u32() % 200001) - 100000; break;
        case TR_I64: ((int64_t *)p)[i] = (int64_t)(rnd_u32() % 200001) - 100000; break;
        default: set_f(p, dtype, i, v); break;
        }
    }
    return p;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ round trips */

static const int64_t counts[] = { 1, 1000, 262145, 3 * 1048576 + 7, 5 * 1048576 + 3 };

static void test_roundtrip_every_dtype(void)
{
    for (int dt = 0; dt < TR_NDTYPES; dt++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            int64_t n = counts[c];
            size_t bytes = (size_t)n * tr_dtype_size(dt);
            unsigned char *in = random_bytes(bytes), *out = malloc(bytes);
            tr_tensor *h = new1(n, dt, TR_CPU), *d = new1(n, dt, DEV), *back = new1(n, dt, TR_CPU);
            if (!in || !out || !h || !d || !back) goto next;
            /* write/read (raw bytes) and copy (tensor to tensor) both ways */
            CHECK(tr_tensor_write(ctx, d, in, bytes) == TR_OK, "write: %s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_read(ctx, d, out, bytes) == TR_OK, "read: %s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(in, out, bytes) == 0, "%s x %lld: write/read differ", tr_dtype_name(dt), (long long)n);
            CHECK(tr_tensor_write(ctx, h, in, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_fill(ctx, d, 0.0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_copy(ctx, d, h) == TR_OK, "copy up: %s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_copy(ctx, back, d) == TR_OK, "copy down: %s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(in, back->data, bytes) == 0, "%s x %lld: copy round trip differs", tr_dtype_name(dt),
                  (long long)n);
        next:
            tr_tensor_free(h);
            tr_tensor_free(d);
            tr_tensor_free(back);
            free(in);
            free(out);
        }
}

static const int conv_pairs[][2] = {
    { TR_F32, TR_BF16 }, { TR_BF16, TR_F32 }, { TR_F32, TR_F16 }, { TR_F16, TR_F32 },
    { TR_BF16, TR_F16 }, { TR_I64, TR_I32 }, { TR_I32, TR_I64 }, { TR_I32, TR_F32 },
};

static void test_converting_copies(void)
{
    for (size_t p = 0; p < sizeof conv_pairs / sizeof conv_pairs[0]; p++)
        for (size_t c = 1; c < sizeof counts / sizeof counts[0]; c += 2) {
            int from = conv_pairs[p][0], to = conv_pairs[p][1];
            int64_t n = counts[c];
            size_t tb = (size_t)n * tr_dtype_size(to);
            void *vals = random_values(from, (size_t)n), *ref = malloc(tb), *out = malloc(tb);
            tr_tensor *hs = new1(n, from, TR_CPU), *ds = new1(n, from, DEV), *dd = new1(n, to, DEV), *hd = new1(n, to, TR_CPU);
            if (!vals || !ref || !out || !hs || !ds || !dd || !hd) goto next;
            tr_convert(ref, to, vals, from, (size_t)n);
            CHECK(tr_tensor_write(ctx, hs, vals, (size_t)n * tr_dtype_size(from)) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            /* host -> device with the conversion on the way up */
            CHECK(tr_tensor_copy(ctx, dd, hs) == TR_OK, "up: %s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_read(ctx, dd, out, tb) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(out, ref, tb) == 0, "%s -> %s x %lld, host->device", tr_dtype_name(from), tr_dtype_name(to),
                  (long long)n);
            /* device -> host with the conversion on the way down */
            CHECK(tr_tensor_copy(ctx, ds, hs) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_copy(ctx, hd, ds) == TR_OK, "down: %s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(hd->data, ref, tb) == 0, "%s -> %s x %lld, device->host", tr_dtype_name(from),
                  tr_dtype_name(to), (long long)n);
            /* device -> device with a dtype change */
            CHECK(tr_tensor_fill(ctx, dd, 0.0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_copy(ctx, dd, ds) == TR_OK, "d2d: %s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_read(ctx, dd, out, tb) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(out, ref, tb) == 0, "%s -> %s x %lld, device->device", tr_dtype_name(from),
                  tr_dtype_name(to), (long long)n);
        next:
            tr_tensor_free(hs);
            tr_tensor_free(ds);
            tr_tensor_free(dd);
            tr_tensor_free(hd);
            free(vals);
            free(ref);
            free(out);
        }
}

static void test_device_to_device(void)
{
    int64_t n = 3 * 1048576 + 1;
    size_t bytes = (size_t)n * 4;
    unsigned char *in = random_bytes(bytes), *out = malloc(bytes);
    tr_tensor *a = new1(n, TR_F32, DEV), *b = new1(n, TR_F32, DEV);
    if (in && out && a && b) {
        CHECK(tr_tensor_write(ctx, a, in, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_tensor_copy(ctx, b, a) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        /* queued: the read on the same stream must see it without an explicit sync */
        CHECK(tr_tensor_read(ctx, b, out, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(memcmp(in, out, bytes) == 0, "cuda:0 -> cuda:0 differs");
        if (tr_cuda_device_count() >= 2) {
            tr_tensor *c = new1(n, TR_F32, 1);
            if (c) {
                CHECK(tr_tensor_copy(ctx, c, a) == TR_OK, "to cuda:1: %s", tr_ctx_errmsg(ctx));
                memset(out, 0, bytes);
                CHECK(tr_tensor_read(ctx, c, out, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
                CHECK(memcmp(in, out, bytes) == 0, "cuda:0 -> cuda:1 differs");
                CHECK(tr_tensor_fill(ctx, b, 0.0) == TR_OK && tr_tensor_copy(ctx, b, c) == TR_OK, "back: %s",
                      tr_ctx_errmsg(ctx));
                CHECK(tr_tensor_read(ctx, b, out, bytes) == TR_OK && memcmp(in, out, bytes) == 0,
                      "cuda:1 -> cuda:0 differs");
            }
            tr_tensor_free(c);
        } else {
            printf("  (one GPU: cuda:N <-> cuda:M not exercised)\n");
        }
    }
    tr_tensor_free(a);
    tr_tensor_free(b);
    free(in);
    free(out);
}

/* ------------------------------------------------------------ fill */

static void test_fill_every_dtype(void)
{
    static const double values[] = { 0.0, 1.5, -3.0, 65504.0, -7.0, 1099511627779.0 };
    static const int64_t ns[] = { 1, 3, 4097, 3000001 };
    for (int dt = 0; dt < TR_NDTYPES; dt++)
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                double value = values[v];
                if (dt == TR_I32 && value > 2147483647.0) continue;
                int64_t n = ns[k];
                size_t bytes = (size_t)n * tr_dtype_size(dt);
                tr_tensor *h = new1(n, dt, TR_CPU), *d = new1(n, dt, DEV);
                unsigned char *out = malloc(bytes);
                if (h && d && out) {
                    CHECK(tr_tensor_write(ctx, d, h->data, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx)); /* garbage */
                    CHECK(tr_tensor_fill(ctx, h, value) == TR_OK, "%s", tr_ctx_errmsg(ctx));
                    CHECK(tr_tensor_fill(ctx, d, value) == TR_OK, "fill: %s", tr_ctx_errmsg(ctx));
                    CHECK(tr_tensor_read(ctx, d, out, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
                    CHECK(memcmp(out, h->data, bytes) == 0, "fill %s x %lld with %g differs from the CPU's",
                          tr_dtype_name(dt), (long long)n, value);
                }
                tr_tensor_free(h);
                tr_tensor_free(d);
                free(out);
            }
}

/* ------------------------------------------------------------ views */

static void test_views_on_device(void)
{
    enum { R = 10, W = 1000 };
    int64_t shape[2] = { R, W };
    tr_tensor *d = tr_tensor_new(ctx, 2, shape, TR_F32, DEV, TR_TAG_ACTIVATIONS);
    CHECK(d != NULL, "%s", tr_ctx_errmsg(ctx));
    if (!d) return;
    static float all[R * W], rows[4 * W], got[R * W];
    for (int i = 0; i < R * W; i++) all[i] = (float)i;
    CHECK(tr_tensor_write(ctx, d, all, sizeof all) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    tr_tensor *nv = tr_tensor_narrow(ctx, d, 3, 4);
    CHECK(nv && nv->device == DEV, "narrow: %s", tr_ctx_errmsg(ctx));
    if (nv) {
        CHECK(tr_tensor_read(ctx, nv, rows, sizeof rows) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(memcmp(rows, all + 3 * W, sizeof rows) == 0, "narrow view reads other rows");
        CHECK(tr_tensor_fill(ctx, nv, -1.0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_tensor_read(ctx, d, got, sizeof got) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        int bad = 0;
        for (int i = 0; i < R * W; i++) bad += got[i] != ((i >= 3 * W && i < 7 * W) ? -1.0f : all[i]);
        CHECK(bad == 0, "fill through the narrow view: %d elements wrong", bad);
        int64_t flat[1] = { 4 * W };
        tr_tensor *rv = tr_tensor_reshape(ctx, nv, 1, flat);
        tr_tensor *h = new1(4 * W, TR_F32, TR_CPU);
        CHECK(rv && h, "%s", tr_ctx_errmsg(ctx));
        if (rv && h) {
            for (int i = 0; i < 4 * W; i++) ((float *)h->data)[i] = (float)(-i);
            CHECK(tr_tensor_copy(ctx, rv, h) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            CHECK(tr_tensor_read(ctx, d, got, sizeof got) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            bad = 0;
            for (int i = 0; i < R * W; i++)
                bad += got[i] != ((i >= 3 * W && i < 7 * W) ? (float)(-(i - 3 * W)) : all[i]);
            CHECK(bad == 0, "copy into a reshaped narrow view: %d elements wrong", bad);
        }
        tr_tensor_free(rv);
        tr_tensor_free(h);
    }
    tr_tensor_free(nv);
    tr_tensor_free(d);
}

/* ------------------------------------------------------------ big copy */

static void test_big_copy_through_staging(void)
{
    size_t bytes = 300 * MiB;
    int64_t n = (int64_t)(bytes / 4);
    unsigned char *in = malloc(bytes), *out = malloc(bytes);
    tr_tensor *d = new1(n, TR_F32, DEV);
    if (in && out && d) {
        for (size_t i = 0; i < bytes; i += 4) {
            uint32_t x = (uint32_t)(i * 2654435761u);
            memcpy(in + i, &x, 4);
        }
        memset(out, 0, bytes);
        double t0 = seconds();
        CHECK(tr_tensor_write(ctx, d, in, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        double t1 = seconds();
        CHECK(tr_tensor_read(ctx, d, out, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        double t2 = seconds();
        CHECK(memcmp(in, out, bytes) == 0, "300 MiB round trip differs");
        printf("  info: 300 MiB pageable host -> device %.1f GB/s, device -> host %.1f GB/s (staged, 8 MiB chunks)\n",
               bytes / (t1 - t0) / 1e9, bytes / (t2 - t1) / 1e9);
        /* bf16 on the way down: chunked conversion of the whole tensor */
        tr_tensor *hb = new1(n, TR_BF16, TR_CPU);
        uint16_t *ref = malloc((size_t)n * 2);
        if (hb && ref) {
            tr_convert(ref, TR_BF16, in, TR_F32, (size_t)n);
            t0 = seconds();
            CHECK(tr_tensor_copy(ctx, hb, d) == TR_OK, "%s", tr_ctx_errmsg(ctx));
            t1 = seconds();
            CHECK(memcmp(hb->data, ref, (size_t)n * 2) == 0, "300 MiB f32 device -> bf16 host differs");
            printf("  info: 300 MiB f32 device -> bf16 host %.1f GB/s of f32\n", bytes / (t1 - t0) / 1e9);
        }
        free(ref);
        tr_tensor_free(hb);
    }
    tr_tensor_free(d);
    free(in);
    free(out);
}

/* ------------------------------------------------------------ allocator */

static void test_allocator_stress(void)
{
    tr_alloc *a = tr_ctx_alloc(ctx, DEV);
    tr_error err;
    enum { SLOTS = 256, OPS = 4000 };
    void *live[SLOTS] = { 0 };
    size_t sizes[SLOTS] = { 0 };
    tr_alloc_stats st0;
    tr_alloc_get_stats(a, &st0);
    for (int op = 0; op < OPS; op++) {
        int s = (int)(rnd_u32() % SLOTS);
        if (live[s]) {
            tr_alloc_free(a, live[s]);
            live[s] = NULL;
        } else {
            uint32_t r = rnd_u32();
            size_t size = r % 4 == 0 ? (size_t)(r >> 8) % (64 * MiB) : r % 4 == 1 ? (size_t)(r >> 8) % (4 * MiB)
                                                                                   : (size_t)(r >> 8) % 8192;
            int rc = tr_alloc_malloc(a, size, (int)(r % TR_NTAGS), (uintptr_t)dev_stream, &live[s], &err);
            CHECK(rc == TR_OK, "malloc %zu: %s", size, err.msg);
            if (rc != TR_OK) break;
            sizes[s] = size;
            CHECK(tr_alloc_block_size(a, live[s]) >= size, "block smaller than asked");
        }
        if (op % 100 == 0) {
            CHECK(tr_alloc_check(a, &err) == TR_OK, "after %d ops: %s", op, err.msg);
            tr_alloc_stats st;
            tr_alloc_get_stats(a, &st);
            uint64_t sum = 0, tags = 0;
            for (int i = 0; i < SLOTS; i++)
                if (live[i]) sum += tr_alloc_block_size(a, live[i]);
            for (int t = 0; t < TR_NTAGS; t++) {
                tags += st.tag_allocated[t];
                CHECK(st.tag_peak[t] >= st.tag_allocated[t], "tag %d peak below current", t);
            }
            CHECK(st.allocated == st0.allocated + sum, "allocated %llu != %llu + live %llu",
                  (unsigned long long)st.allocated, (unsigned long long)st0.allocated, (unsigned long long)sum);
            CHECK(tags == st.allocated, "tags sum %llu != allocated %llu", (unsigned long long)tags,
                  (unsigned long long)st.allocated);
            CHECK(st.peak_allocated >= st.allocated && st.peak_reserved >= st.reserved && st.reserved >= st.allocated,
                  "peaks/reserved inconsistent");
        }
    }
    /* a freed block of a size is reused for the same size, without a new segment; with
     * caching off (TRAINER_NO_MEMORY_CACHING=1, the sanitizer pass) every request is a
     * segment of its own */
    const int caching = env_caching();
    for (int i = 0; i < SLOTS; i++) tr_alloc_free(a, live[i]);
    void *p = NULL, *q = NULL;
    CHECK(tr_alloc_malloc(a, 5 * MiB, TR_TAG_GRADS, (uintptr_t)dev_stream, &p, &err) == TR_OK, "%s", err.msg);
    tr_alloc_free(a, p);
    tr_alloc_stats before, after;
    tr_alloc_get_stats(a, &before);
    CHECK(tr_alloc_malloc(a, 5 * MiB, TR_TAG_GRADS, (uintptr_t)dev_stream, &q, &err) == TR_OK, "%s", err.msg);
    tr_alloc_get_stats(a, &after);
    if (caching) CHECK(after.n_raw_alloc == before.n_raw_alloc, "the cached 5 MiB block was not reused (a new segment)");
    else CHECK(after.n_raw_alloc == before.n_raw_alloc + 1, "caching off, yet no segment of its own for the request");
    tr_alloc_free(a, q);
    tr_alloc_empty_cache(a);
    CHECK(tr_alloc_check(a, &err) == TR_OK, "%s", err.msg);
    (void)sizes;
}

static void test_oom_and_recovery(void)
{
    uint64_t total = 0, freeb = 0, outside = 0;
    tr_alloc *a = tr_ctx_alloc(ctx, 0);
    CHECK(tr_alloc_device_memory(a, &total, &freeb, &outside) == TR_OK, "no device figures on cuda:0");
    size_t cf = 0, ct = 0;
    TCUDA(cudaMemGetInfo(&cf, &ct));
    CHECK(total == ct && freeb <= total, "figures %llu/%llu vs cudaMemGetInfo %zu/%zu", (unsigned long long)freeb,
          (unsigned long long)total, cf, ct);
    printf("  info: cuda:0 %.2f GiB total, %.2f GiB free, %.2f GiB outside the allocator\n", total / 1073741824.0,
           freeb / 1073741824.0, outside / 1073741824.0);
    int64_t shape[1] = { (int64_t)(total / 4 + (1u << 28)) };   /* 1 GiB more than the card */
    tr_tensor *t = tr_tensor_new(ctx, 1, shape, TR_F32, 0, TR_TAG_ACTIVATIONS);
    CHECK(t == NULL, "a tensor larger than the card was made");
    tr_tensor_free(t);
    const char *m = tr_ctx_errmsg(ctx);
    CHECK(tr_ctx_err(ctx)->status == TR_EOOM, "status %d", tr_ctx_err(ctx)->status);
    CHECK(strstr(m, "out of memory on cuda:0") && strstr(m, "Ledger:") && strstr(m, "The device has"),
          "message: %.600s", m);
    printf("  info: %.300s...\n", m);
    tr_tensor *ok = new1(1 << 20, TR_F32, DEV);
    if (ok) CHECK(tr_tensor_fill(ctx, ok, 2.0) == TR_OK, "after the OOM: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(ok);
    tr_error err;
    CHECK(tr_alloc_check(a, &err) == TR_OK, "%s", err.msg);
    char path[] = "/tmp/trainer_gpu_snapshot_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK(tr_alloc_snapshot(a, path, &err) == TR_OK, "%s", err.msg);
    FILE *f = fopen(path, "r");
    long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
    size_t got = buf && fseek(f, 0, SEEK_SET) == 0 ? fread(buf, 1, (size_t)len, f) : 0;
    if (buf) buf[got] = '\0';
    if (f) fclose(f);
    CHECK(buf && strstr(buf, "\"device_memory\"") && strstr(buf, "\"cuda:0\""), "snapshot lacks the device figures");
    free(buf);
    unlink(path);
}

/* ------------------------------------------------------------ safetensors */

static void test_safetensors_to_device(void)
{
    enum { N1 = 3 * 1048576 + 5, N2 = 4099 };
    float *w = random_values(TR_F32, N1);
    uint16_t *b = random_values(TR_BF16, N2);
    char path[] = "/tmp/trainer_gpu_st_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    tr_st_entry e[2];
    memset(e, 0, sizeof e);
    e[0].name = "w";
    e[0].dtype = "F32";
    e[0].ndim = 2;
    e[0].shape[0] = N1;
    e[0].shape[1] = 1;
    e[0].data = w;
    e[1].name = "b";
    e[1].dtype = "BF16";
    e[1].ndim = 1;
    e[1].shape[0] = N2;
    e[1].data = b;
    tr_error err;
    tr_st_file *f = NULL;
    CHECK(w && b && tr_st_write(path, e, 2, NULL, 0, &err) == TR_OK, "write: %s", err.msg);
    CHECK(tr_st_open(&f, path, &err) == TR_OK, "open: %s", err.msg);
    if (!f) goto out;
    static const int as[] = { TR_F32, TR_BF16, TR_F16 };
    for (int k = 0; k < 2; k++) {
        tr_st_info info;
        CHECK(tr_st_lookup(f, k ? "b" : "w", &info, &err) == TR_OK, "%s", err.msg);
        for (size_t j = 0; j < 3; j++) {
            int dt = as[j];
            size_t bytes = (size_t)info.numel * tr_dtype_size(dt);
            void *ref = malloc(bytes), *out = malloc(bytes);
            tr_tensor *d = new1(info.numel, dt, DEV);
            if (ref && out && d) {
                tr_convert(ref, dt, info.data, info.dtype, (size_t)info.numel);   /* the host load */
                CHECK(tr_tensor_write_converted(ctx, d, info.data, info.dtype, info.numel) == TR_OK, "%s",
                      tr_ctx_errmsg(ctx));
                CHECK(tr_tensor_read(ctx, d, out, bytes) == TR_OK, "%s", tr_ctx_errmsg(ctx));
                CHECK(memcmp(ref, out, bytes) == 0, "%s as %s on cuda:0 differs from the host load", info.name,
                      tr_dtype_name(dt));
            }
            tr_tensor_free(d);
            free(ref);
            free(out);
        }
    }
    /* and saved back from the device (chunked reads): the same bytes as the host write */
    {
        tr_tensor *dw = new1(N1, TR_F32, DEV), *db = new1(N2, TR_BF16, DEV);
        char path2[] = "/tmp/trainer_gpu_st2_XXXXXX";
        int fd2 = mkstemp(path2);
        if (fd2 >= 0) close(fd2);
        if (dw && db) {
            CHECK(tr_tensor_write(ctx, dw, w, (size_t)N1 * 4) == TR_OK && tr_tensor_write(ctx, db, b, (size_t)N2 * 2) == TR_OK,
                  "%s", tr_ctx_errmsg(ctx));
            const tr_tensor *src[2] = { dw, db };
            CHECK(tr_st_write_tensors(ctx, path2, e, src, 2, NULL, 0, &err) == TR_OK, "save from cuda:0: %s", err.msg);
            FILE *fa = fopen(path, "rb"), *fb = fopen(path2, "rb");
            int same = fa && fb;
            for (int ca = 0, cb = 0; same && ca != EOF;) {
                ca = fgetc(fa);
                cb = fgetc(fb);
                same = ca == cb;
            }
            if (fa) fclose(fa);
            if (fb) fclose(fb);
            CHECK(same, "the file saved from the device differs from the host's");
        }
        tr_tensor_free(dw);
        tr_tensor_free(db);
        unlink(path2);
    }
    tr_st_close(f);
out:
    unlink(path);
    free(w);
    free(b);
}

/* ------------------------------------------------------------ main */

int main(void)
{
#ifdef GPU_MEMORY_DRY_RUN
    ctx = tr_ctx_new();
    printf("  dry run on the CPU (GPU_MEMORY_DRY_RUN): the test's logic only\n");
    TEST(test_roundtrip_every_dtype);
    TEST(test_converting_copies);
    TEST(test_fill_every_dtype);
    TEST(test_device_to_device);
    TEST(test_views_on_device);
    TEST(test_big_copy_through_staging);
    TEST(test_allocator_stress);
    TEST(test_safetensors_to_device);
    tr_ctx_free(ctx);
    return gt_done();
#endif
    if (tr_cuda_device_count() < 1) {
        printf("SKIP test_gpu_memory: no CUDA device is visible (tr_cuda_device_count() = 0)\n");
        printf("0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    ctx = tr_ctx_new();
    dev_alloc = ctx ? tr_ctx_alloc(ctx, 0) : NULL;
    dev_state = dev_alloc ? tr_ctx_cuda_state(ctx, 0) : NULL;
    if (!dev_state) {
        printf("FAIL init: %s\n0 passed, 1 failed\n", ctx ? tr_ctx_errmsg(ctx) : "no context");
        return 1;
    }
    dev_stream = (cudaStream_t)tr_cuda_stream(dev_state);
    TEST(test_roundtrip_every_dtype);
    TEST(test_converting_copies);
    TEST(test_device_to_device);
    TEST(test_fill_every_dtype);
    TEST(test_views_on_device);
    TEST(test_big_copy_through_staging);
    TEST(test_allocator_stress);
    TEST(test_oom_and_recovery);
    TEST(test_safetensors_to_device);
    gt_check_device_at_exit();
    tr_ctx_free(ctx);
    return gt_done();
}
