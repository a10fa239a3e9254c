/* dropout_linear_cpu.c — the CPU slots of dropout_linear and dropout_linear_backward: the ops
 * they stand for, called in turn over a workspace copy (dropout into x's dtype, then linear;
 * linear_backward into dout's dtype, dropout_backward, then the sum into dx), so the values are
 * those of the ops called apart. The CPU is bound by the products, not by the copy; the CUDA
 * slot fuses them. */
#include "cpu_slot.h"
#include "ops_dropout_linear.h"
#include "ops_elementwise.h"
#include "ops_dropout.h"

/* A workspace tensor of t's shape in dtype dt (NULL with the error set). */
static tr_tensor *scratch_like(tr_ctx *ctx, const tr_tensor *t, int dt)
{
    return tr_tensor_new(ctx, t->ndim, t->shape, dt, TR_CPU, TR_TAG_WORKSPACE);
}

/* *out = dropout(x) in workspace; NULL when p is 0 (the caller reads x itself). */
static int dropped(tr_ctx *ctx, const tr_tensor *x, float p, const tr_rng_key *key, uint64_t offset,
                   tr_tensor **out)
{
    *out = NULL;
    if (p == 0) return TR_OK;
    tr_tensor *xd = scratch_like(ctx, x, x->dtype);
    if (!xd) return tr_ctx_err(ctx)->status;
    int rc = tr_op_dropout(ctx, xd, x, p, key, offset);
    if (rc != TR_OK) {
        tr_tensor_free(xd);
        return rc;
    }
    *out = xd;
    return TR_OK;
}

int tr_cpu_dropout_linear(tr_ctx *ctx, tr_op_call *c)
{
    tr_tensor *out = (tr_tensor *)c->dropout_linear.out, *xd;
    const tr_tensor *x = c->dropout_linear.x;
    int rc = dropped(ctx, x, c->f[0], c->p, c->u, &xd);
    if (rc == TR_OK) rc = tr_op_linear(ctx, out, xd ? xd : x, c->dropout_linear.w, NULL);
    tr_tensor_free(xd);
    return rc;
}

int tr_cpu_dropout_linear_backward(tr_ctx *ctx, tr_op_call *c)
{
    tr_tensor *dx = (tr_tensor *)c->dropout_linear_backward.dx, *dw = (tr_tensor *)c->dropout_linear_backward.dw;
    const tr_tensor *dout = c->dropout_linear_backward.dout, *x = c->dropout_linear_backward.x,
                    *w = c->dropout_linear_backward.w;
    const float p = c->f[0];
    tr_tensor *xd = NULL, *dxd = NULL;
    int rc = dw ? dropped(ctx, x, p, c->p, c->u, &xd) : TR_OK;
    if (rc == TR_OK && dx && !(dxd = scratch_like(ctx, dx, dout->dtype))) rc = tr_ctx_err(ctx)->status;
    if (rc == TR_OK && (dx || dw)) rc = tr_op_linear_backward(ctx, dxd, dw, NULL, dout, dw ? (xd ? xd : x) : NULL, w);
    if (rc == TR_OK && dxd && p > 0) rc = tr_op_dropout_backward(ctx, dxd, dxd, p, c->p, c->u);
    if (rc == TR_OK && dxd) rc = tr_op_add(ctx, dx, dx, dxd);
    tr_tensor_free(xd);
    tr_tensor_free(dxd);
    return rc;
}
