/* ops_cast.c — tensor-level dtype casts between any two of the five dtypes, through
 * tr_convert (core/tensor.h: round-to-nearest-even, integers by value) in parallel chunks. */
#include "ops_elem.h"

#include "ops_elem_common.h"

int tr_op_cast(tr_ctx *ctx, tr_tensor *out, const tr_tensor *in)
{
    char b[160], b2[160];
    if (!in || !out) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: %s is NULL; pass a tensor", in ? "out" : "in");
    if (in->device != out->device)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "cast: in and out are on different devices; use tr_tensor_copy to move between devices");
    if (in->dtype < 0 || in->dtype >= TR_NDTYPES || out->dtype < 0 || out->dtype >= TR_NDTYPES)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: unknown dtype (%d -> %d)", in->dtype, out->dtype);
    if (out->numel != in->numel)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "cast: out has shape %s but in has %s; they need equal numel",
                       tr_elem_describe(b, sizeof b, out), tr_elem_describe(b2, sizeof b2, in));
    switch (in->device) {
    case TR_CPU:
        tr_elem_convert_parallel(out->data, out->dtype, in->data, in->dtype, (size_t)in->numel);
        return TR_OK;
    default:
        return tr_elem_no_device(ctx, "cast", in->device);
    }
}
