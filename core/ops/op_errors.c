/* op_errors.c — the op layer's shared messages and argument checks (declared in
 * op_table.h): the one error for a missing slot, shape and numel checks, shape strings. Apart
 * from op_table.c so that tensor.c can use the one message without linking the table
 * (and every op behind it) into programs that need only tensors (tests/gpu). */
#include "op_table.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ messages */

void tr_op_device_name(char *buf, size_t len, int device)
{
    if (device == TR_CPU) snprintf(buf, len, "cpu");
    else snprintf(buf, len, "cuda:%d", device);
}

int tr_op_fail_not_built(tr_ctx *ctx, const char *what, int device)
{
    char dev[32];
    tr_op_device_name(dev, sizeof dev, device);
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: the %s path of this op is not built yet (tensors on %s); run it on device \"cpu\" "
                   "(move its tensors there first), or use a build whose op table fills this op's %s slot",
                   what, device == TR_CPU ? "CPU" : "CUDA", dev, device == TR_CPU ? "cpu" : "cuda");
}

int tr_op_fail_unsupported(tr_ctx *ctx, const tr_op_desc *op, const tr_op_call *call)
{
    char dev[32], arg[200] = "";
    size_t len = 0;
    tr_op_device_name(dev, sizeof dev, call->device);
    for (int i = 0; i < op->nargs && len < sizeof arg - 1; i++) {
        char b[160];
        if (!call->t[i]) continue;
        len += (size_t)snprintf(arg + len, sizeof arg - len, "%s%s %s", len ? ", " : "", op->args[i].name,
                                tr_op_describe(b, sizeof b, call->t[i]));
    }
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: the %s backend cannot run these arguments (%s); run this call on device \"cpu\" (move its "
                   "tensors there first)",
                   op->name, dev, arg);
}

const char *tr_op_shape(const tr_tensor *t, char *buf)
{
    if (!t) {
        strcpy(buf, "NULL");
        return buf;
    }
    /* at most 8 dims of at most 20 digits: stop early with "..." rather than overflow 160 */
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

const char *tr_op_describe(char *buf, size_t len, const tr_tensor *t)
{
    char s[160];
    if (!t) snprintf(buf, len, "NULL");
    else snprintf(buf, len, "%s %s", tr_op_shape(t, s), tr_dtype_name(t->dtype));
    return buf;
}

void tr_op_rows(const tr_tensor *t, int64_t *N, int64_t *C)
{
    *C = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    *N = *C > 0 ? t->numel / *C : 0;
}

void tr_op_infer_like(int64_t shape[][8], int *ndim, int *dtype, int a, const tr_tensor *t, int dt)
{
    tr_op_infer_dims(shape, ndim, dtype, a, t->ndim, t->shape, dt);
}

void tr_op_infer_dims(int64_t shape[][8], int *ndim, int *dtype, int a, int n, const int64_t *dims, int dt)
{
    ndim[a] = n < 8 ? n : 8;
    for (int i = 0; i < ndim[a]; i++) shape[a][i] = dims[i];
    dtype[a] = dt;
}

int tr_op_want_numel(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int64_t numel,
                     const char *what)
{
    char b[160];
    if (t->numel == numel) return TR_OK;
    return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s has shape %s (%lld elements) but must have %lld (%s)", op,
                   name, tr_op_describe(b, sizeof b, t), (long long)t->numel, (long long)numel, what);
}

int tr_op_want_shape(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int ndim,
                     const int64_t *shape)
{
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return TR_OK;
    char got[160], want[160];
    tr_tensor fake = { .ndim = ndim };
    for (int i = 0; i < ndim && i < 8; i++) fake.shape[i] = shape[i];
    return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s has shape %s but must be %s", op, name, tr_op_shape(t, got),
                   tr_op_shape(&fake, want));
}

int tr_op_want_shapes(tr_ctx *ctx, const char *op, const char *const *names, const tr_tensor *const *ts, int n,
                      int ndim, const int64_t *shape)
{
    int rc = TR_OK;
    for (int i = 0; i < n && rc == TR_OK; i++)
        if (ts[i]) rc = tr_op_want_shape(ctx, op, names[i], ts[i], ndim, shape);
    return rc;
}
