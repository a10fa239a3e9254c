/* dropout.c — tensor-level dropout from the keyed counter-based RNG (core/base/rng.h).
 * Nothing is stored between forward and backward: each chunk of elements regenerates its
 * keep bits from (key, offset + index), so the forward, the backward and a checkpoint
 * recomputation see the same mask, on any number of threads. Works in chunks with
 * stack buffers: no workspace, any float dtype in and out.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/dropout_cpu.c, core/cuda_ops/dropout_cuda.c. */
#include "ops_dropout.h"

#include "cpu/dropout.h"
#include "op_stage.h"
#include "op_table.h"

#include <string.h>

/* out = in * keep / (1 - p), chunk by chunk (the forward and the backward). */
static int apply_checks(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *in, const char *in_name,
                        float p, const tr_rng_key *key, uint64_t offset)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, in_name[0] == 'x' ? "out" : "dx", out, in->numel,
                                 "the input's number of elements")))
        return rc;
    if (!(p >= 0 && p <= 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: p = %g; the dropout probability must be in [0, 1]", op,
                       (double)p);
    if (!key && p > 0) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: key is NULL; pass the rng key", op);
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(dropout, apply_checks, "dropout", c->dropout.out, c->dropout.x, "x", c->f[0], c->p, c->u)
TR_OP_CHECK_BY(dropout_backward, apply_checks, "dropout_backward", c->dropout_backward.dx, c->dropout_backward.dout,
               "dout", c->f[0], c->p, c->u)

int tr_op_dropout(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key, uint64_t offset)
{
    tr_op_call c = { .t = { out, x }, .f = { p }, .p = key, .u = offset };
    return tr_op_run(ctx, &tr_opd_dropout, &c);
}

int tr_op_dropout_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                           uint64_t offset)
{
    tr_op_call c = { .t = { dx, dout }, .f = { p }, .p = key, .u = offset };
    return tr_op_run(ctx, &tr_opd_dropout_backward, &c);
}
