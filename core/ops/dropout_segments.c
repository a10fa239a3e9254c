/* dropout_segments.c — dropout of a packed tensor, one tr_op_dropout per run of rows
 * (see ops_row_segments.h). The views live on the stack and share the tensors' storage:
 * nothing is allocated, and the per-segment op does the dtype and device dispatch. */
#include "ops_row_segments.h"

#include "ops_elem.h"
#include "op_table.h"

/* A [rows, C] view of t starting at row `row` (t is [R, C] with any leading dims). */
static tr_tensor row_view(const tr_tensor *t, int64_t C, int64_t row, int64_t rows)
{
    tr_tensor v = *t;
    v.data = (char *)t->data + (size_t)(row * C) * tr_dtype_size(t->dtype);
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = C;
    v.numel = rows * C;
    return v;
}

static int run_segments(tr_ctx *ctx, const char *op, int backward, tr_tensor *out, const tr_tensor *in, float p,
                        const tr_rng_key *key, const int64_t *segs, int64_t nseg)
{
    int rc;
    if (!out || !in)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the %s tensor is NULL", op, !out ? "output" : "input");
    if (in->ndim < 1 || in->shape[in->ndim - 1] < 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the input must be [rows, C] with C >= 1", op);
    if ((rc = tr_op_want_numel(ctx, op, backward ? "dx" : "out", out, in->numel, "the input's number of elements")))
        return rc;
    if (nseg < 0 || (nseg > 0 && !segs))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %lld segments with %s table", op, (long long)nseg,
                       segs ? "a" : "no");
    {
        int64_t C = in->shape[in->ndim - 1], R = in->numel / C;
        /* every segment checked before any runs: a bad table changes nothing */
        for (int64_t s = 0; s < nseg; s++) {
            int64_t first = segs[3 * s], rows = segs[3 * s + 1], off = segs[3 * s + 2];
            if (first < 0 || rows < 1 || first > R - rows || off < 0)
                return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                               "%s: segment %lld (rows %lld..%lld, stream offset %lld) is outside the tensor's %lld "
                               "rows or has a negative offset",
                               op, (long long)s, (long long)first, (long long)(first + rows - 1), (long long)off,
                               (long long)R);
        }
        for (int64_t s = 0; s < nseg; s++) {
            tr_tensor vo = row_view(out, C, segs[3 * s], segs[3 * s + 1]);
            tr_tensor vi = row_view(in, C, segs[3 * s], segs[3 * s + 1]);
            uint64_t off = (uint64_t)segs[3 * s + 2];
            rc = backward ? tr_op_dropout_backward(ctx, &vo, &vi, p, key, off) : tr_op_dropout(ctx, &vo, &vi, p, key, off);
            if (rc) return rc;
        }
    }
    return TR_OK;
}

int tr_op_dropout_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key,
                           const int64_t *segs, int64_t nseg)
{
    return run_segments(ctx, "dropout_segments", 0, out, x, p, key, segs, nseg);
}

int tr_op_dropout_segments_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p,
                                    const tr_rng_key *key, const int64_t *segs, int64_t nseg)
{
    return run_segments(ctx, "dropout_segments_backward", 1, dx, dout, p, key, segs, nseg);
}
