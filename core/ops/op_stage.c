/* op_stage.c — f32 staging of half-precision operands for the CPU ops (see op_stage.h). */
#include "op_stage.h"

#include <string.h>

/* ------------------------------------------------------------ workspace */

int tr_stage_scratch(tr_ctx *ctx, size_t bytes, void **out)
{
    *out = NULL;
    tr_alloc *a = tr_ctx_alloc(ctx, TR_CPU);
    if (!a) return tr_ctx_err(ctx)->status ? tr_ctx_err(ctx)->status : TR_EINTERNAL;
    return tr_alloc_malloc(a, bytes, TR_TAG_WORKSPACE, 0, out, tr_ctx_err(ctx));
}

void tr_stage_scratch_free(tr_ctx *ctx, void *p)
{
    if (!p) return;
    tr_alloc *a = tr_ctx_alloc(ctx, TR_CPU);
    if (a) tr_alloc_free(a, p);
}

/* ------------------------------------------------------------ conversion */

void tr_stage_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n)
{
    const size_t chunk = 1 << 16;
    size_t ds = tr_dtype_size(dst_dtype), ss = tr_dtype_size(src_dtype);
    if (n <= chunk) {
        tr_convert(dst, dst_dtype, src, src_dtype, n);
        return;
    }
    int64_t nchunks = (int64_t)((n + chunk - 1) / chunk);
#pragma omp parallel for
    for (int64_t c = 0; c < nchunks; c++) {
        size_t start = (size_t)c * chunk, len = n - start < chunk ? n - start : chunk;
        tr_convert((char *)dst + start * ds, dst_dtype, (const char *)src + start * ss, src_dtype, len);
    }
}

/* ------------------------------------------------------------ stages */

int tr_stage_is_float(int dtype) { return dtype == TR_F32 || dtype == TR_BF16 || dtype == TR_F16; }

int64_t tr_stage_block_rows(int64_t C) { return C > 0 && C < TR_STAGE_BLOCK ? TR_STAGE_BLOCK / C : 1; }

static char *elem_ptr(const tr_tensor *t, int64_t start)
{
    return (char *)t->data + (size_t)start * tr_dtype_size(t->dtype);
}

int tr_stage_buf(tr_ctx *ctx, const tr_tensor *t, int64_t off, int64_t n, int read, float **out, void **owned)
{
    *out = NULL;
    *owned = NULL;
    if (!t) return TR_OK;
    if (t->dtype == TR_F32) {
        *out = (float *)t->data + off;
        return TR_OK;
    }
    int rc = tr_stage_scratch(ctx, (size_t)n * sizeof(float), owned);
    if (rc) return rc;
    *out = *owned;
    if (read) tr_stage_convert(*out, TR_F32, elem_ptr(t, off), t->dtype, (size_t)n);
    return TR_OK;
}

void tr_stage_put(const tr_tensor *t, int64_t off, const float *src, int64_t n)
{
    if (t->dtype == TR_F32 && src == (const float *)t->data + off) return;
    tr_stage_convert(elem_ptr(t, off), t->dtype, src, TR_F32, (size_t)n);
}

int tr_stage_index(tr_ctx *ctx, const tr_tensor *t, const int64_t **out, void **owned)
{
    *owned = NULL;
    if (t->dtype == TR_I64) {
        *out = t->data;
        return TR_OK;
    }
    int rc = tr_stage_scratch(ctx, (size_t)t->numel * sizeof(int64_t), owned);
    if (rc) return rc;
    tr_convert(*owned, TR_I64, t->data, t->dtype, (size_t)t->numel);
    *out = *owned;
    return TR_OK;
}

/* ------------------------------------------------------------ spans */

/* An operand's span as f32: its own memory when f32, else converted into buf. */
static const float *span_in(const tr_tensor *t, int64_t off, int64_t n, float *buf)
{
    if (t->dtype == TR_F32) return (const float *)t->data + off;
    tr_convert(buf, TR_F32, elem_ptr(t, off), t->dtype, (size_t)n);
    return buf;
}

static void one_span(const tr_tensor *y, const tr_tensor *a, const tr_tensor *b, tr_stage_span_fn fn, const void *arg,
                     int64_t s)
{
    float A[TR_STAGE_SPAN], B[TR_STAGE_SPAN], Y[TR_STAGE_SPAN];
    int64_t off = s * TR_STAGE_SPAN, n = y->numel - off < TR_STAGE_SPAN ? y->numel - off : TR_STAGE_SPAN;
    const float *pa = span_in(a, off, n, A), *pb = b ? span_in(b, off, n, B) : NULL;
    float *py = y->dtype == TR_F32 ? (float *)y->data + off : Y;
    fn(arg, py, pa, pb, n);
    if (py == Y) tr_convert(elem_ptr(y, off), y->dtype, Y, TR_F32, (size_t)n);
}

void tr_stage_spans(const tr_tensor *y, const tr_tensor *a, const tr_tensor *b, tr_stage_span_fn fn, const void *arg)
{
    enum { SERIAL_SPANS = 8 };
    int64_t spans = (y->numel + TR_STAGE_SPAN - 1) / TR_STAGE_SPAN;
    if (spans <= SERIAL_SPANS) { /* no OpenMP region: even an if(0) one makes a libgomp team */
        for (int64_t s = 0; s < spans; s++) one_span(y, a, b, fn, arg, s);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < spans; s++) one_span(y, a, b, fn, arg, s);
}
