/* cast.c — tensor-level dtype casts between any two of the five dtypes, through
 * tr_convert (core/tensor/tensor.h: round-to-nearest-even, integers by value) in parallel chunks.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/cast_cpu.c, core/cuda_ops/cast_cuda.c. */
#include "ops_cast.h"

#include "op_stage.h"
#include "op_table.h"

static int cast_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *in)
{
    char b[160], b2[160];
    if (in->dtype < 0 || in->dtype >= TR_NDTYPES || out->dtype < 0 || out->dtype >= TR_NDTYPES)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: unknown dtype (%d -> %d)", in->dtype, out->dtype);
    if (out->numel != in->numel)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: out has shape %s but in has %s; they need equal numel",
                       tr_op_describe(b, sizeof b, out), tr_op_describe(b2, sizeof b2, in));
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(cast, cast_checks, c->cast.out, c->cast.in)

int tr_op_cast(tr_ctx *ctx, tr_tensor *out, const tr_tensor *in)
{
    tr_op_call c = { .t = { out, in } };
    return tr_op_run(ctx, &tr_opd_cast, &c);
}
