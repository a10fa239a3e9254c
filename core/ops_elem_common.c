/* ops_elem_common.c — f32 views, workspace blocks, parallel conversion and message
 * helpers for the opselem ops (see ops_elem_common.h for the contract). */
#include "ops_elem_common.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ workspace */

int tr_elem_ws_alloc(tr_ctx *ctx, size_t bytes, void **out)
{
    *out = NULL;
    tr_alloc *a = tr_ctx_alloc(ctx, TR_CPU);
    if (!a) return tr_ctx_err(ctx)->status ? tr_ctx_err(ctx)->status : TR_EINTERNAL;
    return tr_alloc_malloc(a, bytes, TR_TAG_WORKSPACE, 0, out, tr_ctx_err(ctx));
}

void tr_elem_ws_free(tr_ctx *ctx, void *p)
{
    if (!p) return;
    tr_alloc *a = tr_ctx_alloc(ctx, TR_CPU);
    if (a) tr_alloc_free(a, p);
}

/* ------------------------------------------------------------ conversion */

void tr_elem_convert_parallel(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n)
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

/* ------------------------------------------------------------ views */

int tr_elem_is_float(int dtype) { return dtype == TR_F32 || dtype == TR_BF16 || dtype == TR_F16; }

int64_t tr_elem_block_rows(int64_t C) { return C > 0 && C < TR_ELEM_BLOCK ? TR_ELEM_BLOCK / C : 1; }

int tr_elem_view_in_range(tr_ctx *ctx, tr_elem_view *v, const tr_tensor *t, int64_t start, int64_t n)
{
    memset(v, 0, sizeof *v);
    if (!t) return TR_OK;
    v->n = (size_t)n;
    if (t->dtype == TR_F32) {
        v->p = (float *)t->data + start;
        return TR_OK;
    }
    int rc = tr_elem_ws_alloc(ctx, v->n * sizeof(float), &v->ws);
    if (rc) return rc;
    v->p = v->ws;
    tr_elem_convert_parallel(v->p, TR_F32, (const char *)t->data + start * (int64_t)tr_dtype_size(t->dtype),
                             t->dtype, v->n);
    return TR_OK;
}

int tr_elem_view_out_range(tr_ctx *ctx, tr_elem_view *v, tr_tensor *t, int64_t start, int64_t n, int load)
{
    if (load || !t) return tr_elem_view_in_range(ctx, v, t, start, n);
    memset(v, 0, sizeof *v);
    v->n = (size_t)n;
    if (t->dtype == TR_F32) {
        v->p = (float *)t->data + start;
        return TR_OK;
    }
    int rc = tr_elem_ws_alloc(ctx, v->n * sizeof(float), &v->ws);
    v->p = v->ws;
    return rc;
}

void tr_elem_view_finish_range(tr_elem_view *v, tr_tensor *t, int64_t start)
{
    if (t && v->ws)
        tr_elem_convert_parallel((char *)t->data + start * (int64_t)tr_dtype_size(t->dtype), t->dtype, v->p, TR_F32,
                                 v->n);
}

int tr_elem_view_in(tr_ctx *ctx, tr_elem_view *v, const tr_tensor *t)
{
    return tr_elem_view_in_range(ctx, v, t, 0, t ? t->numel : 0);
}

int tr_elem_view_out(tr_ctx *ctx, tr_elem_view *v, tr_tensor *t, int load)
{
    return tr_elem_view_out_range(ctx, v, t, 0, t ? t->numel : 0, load);
}

void tr_elem_view_finish(tr_elem_view *v, tr_tensor *t) { tr_elem_view_finish_range(v, t, 0); }

void tr_elem_view_release(tr_ctx *ctx, tr_elem_view *v)
{
    tr_elem_ws_free(ctx, v->ws);
    v->ws = NULL;
    v->p = NULL;
}

/* ------------------------------------------------------------ messages and shapes */

const char *tr_elem_describe(char *buf, size_t len, const tr_tensor *t)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < t->ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (k < len) snprintf(buf + k, len - k, "] %s", tr_dtype_name(t->dtype));
    return buf;
}

void tr_elem_rows(const tr_tensor *t, int64_t *N, int64_t *C)
{
    *C = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    *N = *C > 0 ? t->numel / *C : 0;
}

/* ------------------------------------------------------------ argument checks */

static int want(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int device, int index)
{
    char b[160];
    if (!t) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s is NULL; pass a tensor", op, name);
    if (t->device != device)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s is on %s%d but the op's first tensor is on %s%d; move every tensor of one op "
                       "to one device",
                       op, name, t->device == TR_CPU ? "cpu" : "cuda:", t->device == TR_CPU ? 0 : t->device,
                       device == TR_CPU ? "cpu" : "cuda:", device == TR_CPU ? 0 : device);
    if (index && t->dtype != TR_I32 && t->dtype != TR_I64)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s is %s but must hold integer ids (i32 or i64)", op, name,
                       tr_elem_describe(b, sizeof b, t));
    if (!index && !tr_elem_is_float(t->dtype))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s is %s but must be f32, bf16 or f16", op, name,
                       tr_elem_describe(b, sizeof b, t));
    return TR_OK;
}

int tr_elem_want_float(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int device)
{
    return want(ctx, op, name, t, device, 0);
}

int tr_elem_want_index(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int device)
{
    return want(ctx, op, name, t, device, 1);
}

int tr_elem_want_numel(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int64_t numel,
                       const char *what)
{
    char b[160];
    if (t->numel == numel) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s has shape %s (%lld elements) but must have %lld (%s)", op,
                   name, tr_elem_describe(b, sizeof b, t), (long long)t->numel, (long long)numel, what);
}

int tr_elem_no_device(tr_ctx *ctx, const char *op, int device)
{
    return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the CUDA path of this op is not built yet (tensor on cuda:%d); "
                   "run on device \"cpu\"", op, device);
}
