/* dropout_linear.c — the ops dropout_linear and dropout_linear_backward
 * (ops_dropout_linear.h): their shape checks and the public wrappers (arguments in op_list.h;
 * the rng key in call->p, the stream offset in call->u, as dropout's). x is [..., I], w [R, I],
 * out and dout [..., R], dx x's shape, dw w's. */
#include "ops_dropout_linear.h"

#include "op_table.h"

static int check(tr_ctx *ctx, const char *op, const tr_tensor *rows, const char *rows_name, const tr_tensor *x,
                 const tr_tensor *w, const tr_tensor *dx, const tr_tensor *dw, float p, const tr_rng_key *key)
{
    char s1[160], s2[160];
    int rc;
    if (!(p >= 0 && p <= 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: p = %g; the dropout probability must be in [0, 1]", op,
                       (double)p);
    if (!key && p > 0) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: key is NULL; pass the rng key", op);
    if (x->ndim < 1 || x->ndim > 8 || w->ndim != 2 || w->shape[1] != x->shape[x->ndim - 1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: x has shape %s but w has shape %s; w must be [rank, %lld]",
                       op, tr_op_shape(x, s1), tr_op_shape(w, s2), (long long)(x->ndim ? x->shape[x->ndim - 1] : 0));
    int64_t want[8];
    for (int i = 0; i < x->ndim - 1; i++) want[i] = x->shape[i];
    want[x->ndim - 1] = w->shape[0];
    if ((rc = tr_op_want_shape(ctx, op, rows_name, rows, x->ndim, want))) return rc;
    if (dx && (rc = tr_op_want_shape(ctx, op, "dx", dx, x->ndim, x->shape))) return rc;
    if (dw && (rc = tr_op_want_shape(ctx, op, "dw", dw, 2, w->shape))) return rc;
    return TR_OK;
}

TR_OP_CHECK_BY(dropout_linear, check, "dropout_linear", c->dropout_linear.out, "out", c->dropout_linear.x,
               c->dropout_linear.w, NULL, NULL, c->f[0], c->p)
TR_OP_CHECK_BY(dropout_linear_backward, check, "dropout_linear_backward", c->dropout_linear_backward.dout, "dout",
               c->dropout_linear_backward.x, c->dropout_linear_backward.w, c->dropout_linear_backward.dx,
               c->dropout_linear_backward.dw, c->f[0], c->p)

int tr_op_dropout_linear(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const tr_tensor *w, float p,
                         const tr_rng_key *key, uint64_t offset)
{
    tr_op_call c = {.t = {out, x, w}, .f = {p}, .p = key, .u = offset};
    return tr_op_run(ctx, &tr_opd_dropout_linear, &c);
}

int tr_op_dropout_linear_backward(tr_ctx *ctx, tr_tensor *dx, tr_tensor *dw, const tr_tensor *dout,
                                  const tr_tensor *x, const tr_tensor *w, float p, const tr_rng_key *key,
                                  uint64_t offset)
{
    tr_op_call c = {.t = {dx, dw, dout, x, w}, .f = {p}, .p = key, .u = offset};
    return tr_op_run(ctx, &tr_opd_dropout_linear_backward, &c);
}
