/* ops_nn_util.c — argument checks, workspace scratch and f32 staging for the ops of
 * ops_nn.h (see ops_nn_util.h for the contracts). */
#include "ops_nn_util.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ checks */

const char *tr_nn_shape(const tr_tensor *t, char *buf)
{
    if (!t) {
        strcpy(buf, "NULL");
        return buf;
    }
    /* at most 8 dims of at most 20 digits + ", " each: 1 + 8 * 22 + 2 > 160, so stop
     * early with "..." rather than overflow */
    size_t len = 0;
    buf[len++] = '[';
    for (int i = 0; i < t->ndim && i < 8; i++) {
        if (len > 130) {
            len += (size_t)snprintf(buf + len, 160 - len, ", ...");
            break;
        }
        len += (size_t)snprintf(buf + len, 160 - len, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    }
    buf[len++] = ']';
    buf[len] = '\0';
    return buf;
}

static int is_float(int dtype) { return dtype == TR_F32 || dtype == TR_BF16 || dtype == TR_F16; }

int tr_nn_check_float(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *t)
{
    if (is_float(t->dtype)) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: %s has dtype %s but must be a floating dtype (f32, bf16 or f16); cast it "
                   "first",
                   op, what, tr_dtype_name(t->dtype));
}

int tr_nn_check_f32(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *t)
{
    if (t->dtype == TR_F32) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: %s has dtype %s but must be f32 (parameter gradients and saved "
                   "statistics are kept in f32 even in mixed precision)",
                   op, what, tr_dtype_name(t->dtype));
}

int tr_nn_check_device(tr_ctx *ctx, const char *op, const tr_tensor *const *ts,
                       const char *const *names, int n, int *device)
{
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (first < 0) {
            first = i;
            continue;
        }
        if (ts[i]->device != ts[first]->device)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: %s is on device %d but %s is on device %d (-1 = cpu); move them "
                           "to one device first",
                           op, names[i], ts[i]->device, names[first], ts[first]->device);
    }
    *device = first >= 0 ? ts[first]->device : TR_CPU;
    return TR_OK;
}

int tr_nn_check_shape(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *t,
                      int ndim, const int64_t *shape)
{
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return TR_OK;
    char got[160], want[160];
    tr_tensor fake = { .ndim = ndim };
    for (int i = 0; i < ndim && i < 8; i++) fake.shape[i] = shape[i];
    return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s has shape %s but must be %s", op, what,
                   tr_nn_shape(t, got), tr_nn_shape(&fake, want));
}

/* ------------------------------------------------------------ scratch */

int tr_nn_scratch(tr_ctx *ctx, size_t nbytes, void **out)
{
    *out = NULL;
    tr_alloc *a = tr_ctx_alloc(ctx, TR_CPU);
    if (!a) return tr_ctx_err(ctx)->status;
    return tr_alloc_malloc(a, nbytes, TR_TAG_WORKSPACE, 0, out, tr_ctx_err(ctx));
}

void tr_nn_scratch_free(tr_ctx *ctx, void *p)
{
    if (p) tr_alloc_free(tr_ctx_alloc(ctx, TR_CPU), p);
}

/* ------------------------------------------------------------ staging */

int tr_nn_load(tr_ctx *ctx, const tr_tensor *t, int64_t off, int64_t n, float **out, void **owned)
{
    *owned = NULL;
    if (t->dtype == TR_F32) {
        *out = (float *)t->data + off;
        return TR_OK;
    }
    int rc = tr_nn_scratch(ctx, (size_t)n * sizeof(float), owned);
    if (rc != TR_OK) return rc;
    tr_convert(*owned, TR_F32, (const char *)t->data + (size_t)off * tr_dtype_size(t->dtype),
               t->dtype, (size_t)n);
    *out = *owned;
    return TR_OK;
}

int tr_nn_out(tr_ctx *ctx, tr_tensor *t, int64_t off, int64_t n, int read, float **out,
              void **owned)
{
    *owned = NULL;
    if (t->dtype == TR_F32) {
        *out = (float *)t->data + off;
        return TR_OK;
    }
    int rc = tr_nn_scratch(ctx, (size_t)n * sizeof(float), owned);
    if (rc != TR_OK) return rc;
    if (read)
        tr_convert(*owned, TR_F32, (const char *)t->data + (size_t)off * tr_dtype_size(t->dtype),
                   t->dtype, (size_t)n);
    *out = *owned;
    return TR_OK;
}

void tr_nn_store(tr_tensor *t, int64_t off, const float *src, int64_t n)
{
    if (t->dtype == TR_F32 && src == (const float *)t->data + off) return;
    tr_convert((char *)t->data + (size_t)off * tr_dtype_size(t->dtype), t->dtype, src, TR_F32,
               (size_t)n);
}

int64_t tr_nn_chunk_rows(int64_t row_elems)
{
    const int64_t target = (int64_t)1 << 20;
    int64_t rows = row_elems > 0 ? target / row_elems : target;
    return rows > 0 ? rows : 1;
}
