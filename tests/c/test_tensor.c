/* test_tensor.c — the context and tensors on the CPU: allocator accounting, views that
 * outlive their base, validation errors, copies with dtype conversion, fills. */
#include "check.h"
#include "trainer.h"

#include <math.h>
#include <string.h>

static tr_alloc_stats cpu_stats(tr_ctx *ctx)
{
    tr_alloc_stats s;
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &s);
    return s;
}

/* The end of a case with its own context: everything it allocated on the CPU was freed. */
static void ctx_end(tr_ctx *ctx)
{
    CHECK(cpu_stats(ctx).allocated == 0, "all freed");
    tr_ctx_free(ctx);
}

static int msg_has(tr_ctx *ctx, const char *needle) { return strstr(tr_ctx_errmsg(ctx), needle) != NULL; }

/* ------------------------------------------------------------ context */

static void test_ctx_devices(void)
{
    tr_ctx *ctx = tr_ctx_new();
    CHECK(ctx != NULL, "tr_ctx_new");
    if (!ctx) return;
    CHECK(tr_ctx_err(ctx)->status == TR_OK && tr_ctx_errmsg(ctx)[0] == '\0', "fresh error is clear");
    CHECK(tr_ctx_alloc(ctx, TR_CPU) != NULL, "cpu allocator exists");
    CHECK(tr_ctx_alloc(ctx, TR_CPU) == tr_ctx_alloc(ctx, TR_CPU), "one cpu allocator");
    CHECK(tr_cuda_device_count() == 0, "this test build has no CUDA");
    CHECK(tr_ctx_alloc(ctx, 0) == NULL, "cuda:0 refused");
    CHECK(tr_ctx_err(ctx)->status == TR_EUSER, "status %d", tr_ctx_err(ctx)->status);
    CHECK(msg_has(ctx, "no CUDA backend") && msg_has(ctx, "nvcc"), "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_ctx_alloc(ctx, 16) == NULL && msg_has(ctx, "does not exist"), "device 16: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_ctx_alloc(ctx, -2) == NULL && tr_ctx_err(ctx)->status == TR_EUSER, "device -2");
    CHECK(tr_ctx_cuda_state(ctx, TR_CPU) == NULL, "no cuda state for the cpu");
    CHECK(tr_ctx_cuda_state(ctx, 0) == NULL, "no cuda state without CUDA");
    tr_ctx_free(ctx);
    tr_ctx_free(NULL);
}

/* ------------------------------------------------------------ lifetime */

static void test_create_free_restores_stats(void)
{
    tr_ctx *ctx = tr_ctx_new();
    if (!ctx) { CHECK(0, "ctx"); return; }
    tr_alloc_stats before = cpu_stats(ctx);
    const int64_t shape[3] = { 3, 5, 7 };
    for (int dt = 0; dt < TR_NDTYPES; dt++) {
        for (int tag = 0; tag < TR_NTAGS; tag++) {
            tr_tensor *t = tr_tensor_new(ctx, 3, shape, dt, TR_CPU, tag);
            CHECK(t != NULL, "new %s/%s: %s", tr_dtype_name(dt), tr_tag_name(tag), tr_ctx_errmsg(ctx));
            if (!t) continue;
            CHECK(t->numel == 105 && t->ndim == 3 && t->dtype == dt && t->tag == tag && t->device == TR_CPU,
                  "fields");
            CHECK(tr_tensor_nbytes(t) == 105 * tr_dtype_size(dt), "nbytes %zu", tr_tensor_nbytes(t));
            tr_alloc_stats s = cpu_stats(ctx);
            CHECK(s.tag_allocated[tag] >= tr_tensor_nbytes(t), "tag %s holds %llu", tr_tag_name(tag),
                  (unsigned long long)s.tag_allocated[tag]);
            CHECK(s.n_live_blocks == before.n_live_blocks + 1, "one live block");
            CHECK(((uintptr_t)t->data & 255) == 0, "256-byte aligned");
            tr_tensor_free(t);
            s = cpu_stats(ctx);
            CHECK(s.allocated == before.allocated && s.tag_allocated[tag] == before.tag_allocated[tag],
                  "freed: allocated %llu", (unsigned long long)s.allocated);
        }
    }
    /* scalar and empty tensors */
    tr_tensor *scalar = tr_tensor_new(ctx, 0, NULL, TR_F32, TR_CPU, TR_TAG_WORKSPACE);
    CHECK(scalar && scalar->numel == 1 && tr_tensor_nbytes(scalar) == 4, "scalar");
    const int64_t zero[2] = { 0, 4 };
    tr_tensor *empty = tr_tensor_new(ctx, 2, zero, TR_BF16, TR_CPU, TR_TAG_WORKSPACE);
    CHECK(empty && empty->numel == 0 && tr_tensor_nbytes(empty) == 0, "empty");
    tr_tensor_free(scalar);
    tr_tensor_free(empty);
    tr_tensor_free(NULL);
    tr_error err;
    CHECK(tr_alloc_check(tr_ctx_alloc(ctx, TR_CPU), &err) == TR_OK, "allocator invariants");
    CHECK(cpu_stats(ctx).allocated == before.allocated, "all returned");
    tr_ctx_free(ctx);
}

static void test_views_keep_storage_alive(void)
{
    tr_ctx *ctx = tr_ctx_new();
    if (!ctx) { CHECK(0, "ctx"); return; }
    const int64_t shape[2] = { 4, 3 };
    tr_tensor *t = tr_tensor_new(ctx, 2, shape, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    if (!t) { CHECK(0, "new: %s", tr_ctx_errmsg(ctx)); tr_ctx_free(ctx); return; }
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i;
    CHECK(tr_tensor_write(ctx, t, v, sizeof v) == TR_OK, "write");
    uint64_t live = cpu_stats(ctx).tag_allocated[TR_TAG_ACTIVATIONS];

    tr_tensor *rows = tr_tensor_narrow(ctx, t, 1, 2);
    CHECK(rows && rows->shape[0] == 2 && rows->shape[1] == 3 && rows->numel == 6, "narrow shape");
    const int64_t flat[1] = { -1 };
    tr_tensor *r = rows ? tr_tensor_reshape(ctx, rows, 1, flat) : NULL;
    CHECK(r && r->ndim == 1 && r->shape[0] == 6, "reshape with -1 infers 6");
    CHECK(r && r->storage == t->storage && r->data == (char *)t->data + 12, "shares the storage");
    CHECK(cpu_stats(ctx).tag_allocated[TR_TAG_ACTIVATIONS] == live, "views allocate nothing");

    tr_tensor_free(t);
    CHECK(cpu_stats(ctx).tag_allocated[TR_TAG_ACTIVATIONS] == live, "base freed, storage alive");
    float got[6] = { 0 };
    CHECK(r && tr_tensor_read(ctx, r, got, sizeof got) == TR_OK, "read the view");
    for (int i = 0; i < 6; i++) CHECK(got[i] == (float)(3 + i), "element %d = %g", i, got[i]);
    tr_tensor_free(rows);
    CHECK(cpu_stats(ctx).tag_allocated[TR_TAG_ACTIVATIONS] == live, "one view left");
    tr_tensor_free(r);
    CHECK(cpu_stats(ctx).tag_allocated[TR_TAG_ACTIVATIONS] == 0, "last view frees the storage");

    /* a narrow of everything and of nothing */
    t = tr_tensor_new(ctx, 2, shape, TR_I64, TR_CPU, TR_TAG_WORKSPACE);
    tr_tensor *all = t ? tr_tensor_narrow(ctx, t, 0, 4) : NULL;
    tr_tensor *none = t ? tr_tensor_narrow(ctx, t, 4, 0) : NULL;
    CHECK(all && all->numel == 12 && all->data == t->data, "narrow all");
    CHECK(none && none->numel == 0, "narrow none");
    tr_tensor_free(all);
    tr_tensor_free(none);
    tr_tensor_free(t);
    ctx_end(ctx);
}

/* ------------------------------------------------------------ errors */

static void test_errors(void)
{
    tr_ctx *ctx = tr_ctx_new();
    if (!ctx) { CHECK(0, "ctx"); return; }
    tr_alloc_stats before = cpu_stats(ctx);
    const int64_t nine[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    CHECK(!tr_tensor_new(ctx, 9, nine, TR_F32, TR_CPU, 0) && msg_has(ctx, "ndim 9"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_new(ctx, -1, nine, TR_F32, TR_CPU, 0) && msg_has(ctx, "ndim -1"), "%s", tr_ctx_errmsg(ctx));
    tr_tensor *eight = tr_tensor_new(ctx, 8, nine, TR_F32, TR_CPU, 0);
    CHECK(eight && eight->numel == 1, "8 dims are fine");
    const int64_t neg[2] = { 3, -2 };
    CHECK(!tr_tensor_new(ctx, 2, neg, TR_F32, TR_CPU, 0) && msg_has(ctx, "negative") && msg_has(ctx, "[3, -2]"),
          "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_ctx_err(ctx)->status == TR_EUSER, "status");
    const int64_t huge[3] = { (int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31 };
    CHECK(!tr_tensor_new(ctx, 3, huge, TR_F32, TR_CPU, 0) && msg_has(ctx, "64 bits"), "%s", tr_ctx_errmsg(ctx));
    const int64_t big[2] = { (int64_t)1 << 31, (int64_t)1 << 31 };
    CHECK(!tr_tensor_new(ctx, 2, big, TR_I64, TR_CPU, 0) && msg_has(ctx, "size_t"), "%s", tr_ctx_errmsg(ctx));
    const int64_t ok[2] = { 4, 3 };
    CHECK(!tr_tensor_new(ctx, 2, ok, 7, TR_CPU, 0) && msg_has(ctx, "dtype 7"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_new(ctx, 2, ok, TR_F32, TR_CPU, 5) && msg_has(ctx, "tag 5"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_new(ctx, 2, ok, TR_F32, 0, 0) && msg_has(ctx, "no CUDA backend"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_new(NULL, 2, ok, TR_F32, TR_CPU, 0), "NULL ctx");

    tr_tensor_free(eight);
    tr_alloc_stats mid = cpu_stats(ctx);
    CHECK(mid.n_live_blocks == before.n_live_blocks && mid.allocated == before.allocated,
          "failed creations allocate nothing");

    tr_tensor *t = tr_tensor_new(ctx, 2, ok, TR_F32, TR_CPU, 0);
    if (!t) { CHECK(0, "new"); tr_ctx_free(ctx); return; }
    CHECK(!tr_tensor_narrow(ctx, t, -1, 2) && msg_has(ctx, "out of range"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_narrow(ctx, t, 3, 2) && msg_has(ctx, "start + len <= 4"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_narrow(ctx, t, 5, 0), "start past the end");
    CHECK(!tr_tensor_narrow(ctx, t, 0, -1), "negative len");
    CHECK(!tr_tensor_narrow(ctx, t, 1, INT64_MAX), "len overflowing start + len");
    const int64_t five[1] = { 5 };
    CHECK(!tr_tensor_reshape(ctx, t, 1, five) && msg_has(ctx, "[5] has 5 elements") && msg_has(ctx, "[4, 3]"),
          "%s", tr_ctx_errmsg(ctx));
    const int64_t infer_bad[2] = { 5, -1 };
    CHECK(!tr_tensor_reshape(ctx, t, 2, infer_bad) && msg_has(ctx, "infer"), "%s", tr_ctx_errmsg(ctx));
    const int64_t two_infer[2] = { -1, -1 };
    CHECK(!tr_tensor_reshape(ctx, t, 2, two_infer) && msg_has(ctx, "negative"), "%s", tr_ctx_errmsg(ctx));
    CHECK(!tr_tensor_reshape(ctx, t, 9, nine), "reshape to 9 dims");
    const int64_t infer_ok[3] = { 2, -1, 3 };
    tr_tensor *r = tr_tensor_reshape(ctx, t, 3, infer_ok);
    CHECK(r && r->shape[1] == 2, "inferred middle dim");
    tr_tensor_free(r);
    tr_tensor *scalar = tr_tensor_new(ctx, 0, NULL, TR_F32, TR_CPU, 0);
    CHECK(scalar && !tr_tensor_narrow(ctx, scalar, 0, 1) && msg_has(ctx, "0-dimensional"), "%s",
          tr_ctx_errmsg(ctx));
    tr_tensor_free(scalar);

    float buf[12];
    CHECK(tr_tensor_write(ctx, t, buf, 11 * sizeof(float)) == TR_EUSER && msg_has(ctx, "48 bytes"), "%s",
          tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_read(ctx, t, buf, 52) == TR_EUSER, "read size");
    CHECK(tr_tensor_read(ctx, t, NULL, 48) == TR_EUSER, "NULL host");
    CHECK(tr_tensor_fill(ctx, NULL, 1.0) == TR_EUSER, "fill NULL");
    tr_tensor_free(t);

    tr_alloc_stats after = cpu_stats(ctx);
    CHECK(after.n_live_blocks == before.n_live_blocks && after.allocated == before.allocated,
          "failed views and copies allocate nothing: %llu live", (unsigned long long)after.n_live_blocks);
    tr_ctx_free(ctx);
}

/* ------------------------------------------------------------ data */

static void test_copy_with_conversion(void)
{
    tr_ctx *ctx = tr_ctx_new();
    if (!ctx) { CHECK(0, "ctx"); return; }
    const int64_t s23[2] = { 2, 3 }, s6[1] = { 6 }, s5[1] = { 5 };
    tr_tensor *f = tr_tensor_new(ctx, 2, s23, TR_F32, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *b = tr_tensor_new(ctx, 1, s6, TR_BF16, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *h = tr_tensor_new(ctx, 1, s6, TR_F16, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *i = tr_tensor_new(ctx, 2, s23, TR_I32, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *back = tr_tensor_new(ctx, 1, s6, TR_F32, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *five = tr_tensor_new(ctx, 1, s5, TR_F32, TR_CPU, TR_TAG_WEIGHTS);
    if (!f || !b || !h || !i || !back || !five) { CHECK(0, "new: %s", tr_ctx_errmsg(ctx)); goto done; }
    const float v[6] = { 1.0f, -2.5f, 1.0f / 3.0f, 70000.0f, 1e-8f, -0.0f };
    CHECK(tr_tensor_write(ctx, f, v, sizeof v) == TR_OK, "write");

    CHECK(tr_tensor_copy(ctx, b, f) == TR_OK, "f32 -> bf16 (other shape, same numel)");
    uint16_t bb[6];
    tr_tensor_read(ctx, b, bb, sizeof bb);
    for (int k = 0; k < 6; k++) CHECK(bb[k] == tr_f32_to_bf16(v[k]), "bf16 element %d", k);
    CHECK(tr_tensor_copy(ctx, back, b) == TR_OK, "bf16 -> f32");
    float got[6];
    tr_tensor_read(ctx, back, got, sizeof got);
    CHECK(got[0] == 1.0f && got[1] == -2.5f && fabsf(got[2] - 1.0f / 3.0f) < 2e-3f, "values back");

    CHECK(tr_tensor_copy(ctx, h, f) == TR_OK, "f32 -> f16");
    CHECK(tr_tensor_copy(ctx, back, h) == TR_OK, "f16 -> f32");
    tr_tensor_read(ctx, back, got, sizeof got);
    CHECK(isinf(got[3]) && got[3] > 0, "70000 overflows f16 to inf: %g", got[3]);
    CHECK(got[4] == 0.0f, "1e-8 underflows f16: %g", got[4]);

    CHECK(tr_tensor_copy(ctx, i, f) == TR_OK, "f32 -> i32");
    int32_t ii[6];
    tr_tensor_read(ctx, i, ii, sizeof ii);
    CHECK(ii[0] == 1 && ii[1] == -2 && ii[2] == 0 && ii[3] == 70000, "by value, truncated");

    CHECK(tr_tensor_copy(ctx, five, f) == TR_EUSER && msg_has(ctx, "element counts"), "%s", tr_ctx_errmsg(ctx));
    /* a converting copy into an overlapping view is refused; a same-dtype one is a move */
    tr_tensor *flat = tr_tensor_reshape(ctx, f, 1, s6);
    CHECK(flat && tr_tensor_copy(ctx, flat, f) == TR_OK, "same-dtype copy onto itself");
    tr_tensor *row0 = tr_tensor_narrow(ctx, f, 0, 1), *row1 = tr_tensor_narrow(ctx, f, 1, 1);
    CHECK(row0 && row1 && tr_tensor_copy(ctx, row0, row1) == TR_OK, "row copy");
    tr_tensor_read(ctx, f, got, sizeof got);
    CHECK(got[0] == 70000.0f && got[3] == 70000.0f, "row 1 copied onto row 0");
    /* The API makes no view with another dtype, but an FFI caller can build a header:
     * a bf16 header over f's bytes must be refused, not silently corrupt f. */
    tr_tensor forged = *f;
    forged.dtype = TR_BF16;
    CHECK(tr_tensor_copy(ctx, &forged, f) == TR_EUSER && msg_has(ctx, "overlap"), "%s", tr_ctx_errmsg(ctx));
    tr_tensor_free(flat);
    tr_tensor_free(row0);
    tr_tensor_free(row1);
done:
    tr_tensor_free(f);
    tr_tensor_free(b);
    tr_tensor_free(h);
    tr_tensor_free(i);
    tr_tensor_free(back);
    tr_tensor_free(five);
    ctx_end(ctx);
}

static void test_fill_and_zeros(void)
{
    tr_ctx *ctx = tr_ctx_new();
    if (!ctx) { CHECK(0, "ctx"); return; }
    const int64_t s[1] = { 37 };
    for (int dt = 0; dt < TR_NDTYPES; dt++) {
        tr_tensor *t = tr_tensor_new(ctx, 1, s, dt, TR_CPU, TR_TAG_WORKSPACE);
        if (!t) { CHECK(0, "new"); continue; }
        CHECK(tr_tensor_fill(ctx, t, -3.0) == TR_OK, "fill %s", tr_dtype_name(dt));
        tr_tensor *f = tr_tensor_new(ctx, 1, s, TR_F32, TR_CPU, TR_TAG_WORKSPACE);
        tr_tensor *z = tr_tensor_zeros(ctx, 1, s, dt, TR_CPU, TR_TAG_WORKSPACE);
        if (f && z) {
            tr_tensor_copy(ctx, f, t);
            float v[37];
            tr_tensor_read(ctx, f, v, sizeof v);
            int bad = 0;
            for (int k = 0; k < 37; k++) bad += v[k] != -3.0f;
            CHECK(bad == 0, "%s fill -3: %d wrong", tr_dtype_name(dt), bad);
            unsigned char zb[37 * 8], zeros[37 * 8] = { 0 };
            tr_tensor_read(ctx, z, zb, tr_tensor_nbytes(z));
            CHECK(memcmp(zb, zeros, tr_tensor_nbytes(z)) == 0, "%s zeros", tr_dtype_name(dt));
        }
        tr_tensor_free(f);
        tr_tensor_free(z);
        tr_tensor_free(t);
    }
    tr_tensor *b = tr_tensor_new(ctx, 1, s, TR_BF16, TR_CPU, 0);
    tr_tensor *i = tr_tensor_new(ctx, 1, s, TR_I32, TR_CPU, 0);
    tr_tensor *l = tr_tensor_new(ctx, 1, s, TR_I64, TR_CPU, 0);
    if (b && i && l) {
        uint16_t x[37];
        tr_tensor_fill(ctx, b, 1.5);
        tr_tensor_read(ctx, b, x, sizeof x);
        CHECK(x[0] == 0x3fc0 && x[36] == 0x3fc0, "bf16 1.5 = %04x", x[0]);
        CHECK(tr_tensor_fill(ctx, i, 3e9) == TR_EUSER && msg_has(ctx, "does not fit"), "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_tensor_fill(ctx, l, NAN) == TR_EUSER, "NaN into i64");
        CHECK(tr_tensor_fill(ctx, l, 4294967296.0) == TR_OK, "2^32 into i64");
        int64_t y[37];
        tr_tensor_read(ctx, l, y, sizeof y);
        CHECK(y[5] == 4294967296ll, "i64 value %lld", (long long)y[5]);
    } else {
        CHECK(0, "new");
    }
    tr_tensor_free(b);
    tr_tensor_free(i);
    tr_tensor_free(l);
    ctx_end(ctx);
}

int main(void)
{
    RUN(test_ctx_devices);
    RUN(test_create_free_restores_stats);
    RUN(test_views_keep_storage_alive);
    RUN(test_errors);
    RUN(test_copy_with_conversion);
    RUN(test_fill_and_zeros);
    return check_done();
}
