/* cast.c — tensor-level dtype casts between any two of the five dtypes, through
 * tr_convert (core/tensor/tensor.h: round-to-nearest-even, integers by value) in parallel chunks. */
#include "ops_elem.h"

#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

static int cast_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *in)
{
    char b[160], b2[160];
    if (in->dtype < 0 || in->dtype >= TR_NDTYPES || out->dtype < 0 || out->dtype >= TR_NDTYPES)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: unknown dtype (%d -> %d)", in->dtype, out->dtype);
    if (out->numel != in->numel)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: out has shape %s but in has %s; they need equal numel",
                       tr_op_describe(b, sizeof b, out), tr_op_describe(b2, sizeof b2, in));
    if (!run) return TR_OK;
    tr_stage_convert(out->data, out->dtype, in->data, in->dtype, (size_t)in->numel);
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(cast, c->t[0], c->t[1])

/* Between devices, tr_tensor_copy moves data; cast wants one device like every op. */
const tr_op_desc tr_opd_cast = {
    "cast", 2, { { "out", TR_ARG_OUT, TR_DT_ANY, 0 }, { "in", TR_ARG_IN, TR_DT_ANY, 0 } },
    cast_check, { cast_cpu, TR_CUDA_SLOT(cast) } };

int tr_op_cast(tr_ctx *ctx, tr_tensor *out, const tr_tensor *in)
{
    tr_op_call c = { .t = { out, in } };
    return tr_op_run(ctx, &tr_opd_cast, &c);
}
