/* ops_elementwise.c — tensor-level add, mul (+ backward), scale, axpy, fill over the
 * kernels in kernels/cpu/elementwise.c. b broadcasts when it is a vector of a's last
 * dimension; every tensor may be f32, bf16 or f16 (computed in f32). */
#include "ops_elem.h"

#include "cpu/elementwise.h"
#include "ops_elem_common.h"

/* ------------------------------------------------------------ shape checks */

/* Checks the binary op's operands; sets N, C and b_rows (N or 1 for a broadcast b). */
static int binary_shapes(tr_ctx *ctx, const char *op, const tr_tensor *a, const tr_tensor *b, int64_t *N,
                         int64_t *C, int64_t *b_rows)
{
    char sa[160], sb[160];
    tr_elem_rows(a, N, C);
    if (b->numel == a->numel) {
        *b_rows = *N;
        return TR_OK;
    }
    if (b->numel == *C && b->ndim <= 1) {
        *b_rows = 1;
        return TR_OK;
    }
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "%s: b has shape %s but a has %s; b must have a's shape or be a vector of a's last "
                   "dimension (%lld) to broadcast over rows",
                   op, tr_elem_describe(sb, sizeof sb, b), tr_elem_describe(sa, sizeof sa, a), (long long)*C);
}

/* ------------------------------------------------------------ add, mul */

static int binary(tr_ctx *ctx, const char *op, tr_tensor *out, const tr_tensor *a, const tr_tensor *b, int is_mul)
{
    int rc, device = a ? a->device : TR_CPU;
    int64_t N, C, b_rows;
    if ((rc = tr_elem_want_float(ctx, op, "a", a, device)) || (rc = tr_elem_want_float(ctx, op, "b", b, device)) ||
        (rc = tr_elem_want_float(ctx, op, "out", out, device)))
        return rc;
    if ((rc = binary_shapes(ctx, op, a, b, &N, &C, &b_rows))) return rc;
    if ((rc = tr_elem_want_numel(ctx, op, "out", out, a->numel, "a's number of elements"))) return rc;
    switch (device) {
    case TR_CPU: {
        tr_elem_view va, vb, vo;
        if ((rc = tr_elem_view_in(ctx, &va, a))) return rc;
        if ((rc = tr_elem_view_in(ctx, &vb, b))) goto free_a;
        if ((rc = tr_elem_view_out(ctx, &vo, out, 0))) goto free_b;
        if (is_mul) mul_forward_f32(vo.p, va.p, vb.p, N, C, b_rows);
        else add_forward_f32(vo.p, va.p, vb.p, N, C, b_rows);
        tr_elem_view_finish(&vo, out);
        tr_elem_view_release(ctx, &vo);
    free_b:
        tr_elem_view_release(ctx, &vb);
    free_a:
        tr_elem_view_release(ctx, &va);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

int tr_op_add(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    return binary(ctx, "add", out, a, b, 0);
}

int tr_op_mul(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    return binary(ctx, "mul", out, a, b, 1);
}

int tr_op_mul_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                       const tr_tensor *b)
{
    const char *op = "mul_backward";
    int rc, device = dout ? dout->device : TR_CPU;
    int64_t N, C, b_rows;
    if ((rc = tr_elem_want_float(ctx, op, "dout", dout, device)) || (rc = tr_elem_want_float(ctx, op, "a", a, device)) ||
        (rc = tr_elem_want_float(ctx, op, "b", b, device)) ||
        (da && (rc = tr_elem_want_float(ctx, op, "da", da, device))) ||
        (db && (rc = tr_elem_want_float(ctx, op, "db", db, device))))
        return rc;
    if ((rc = binary_shapes(ctx, op, a, b, &N, &C, &b_rows)) ||
        (rc = tr_elem_want_numel(ctx, op, "dout", dout, a->numel, "a's number of elements")) ||
        (da && (rc = tr_elem_want_numel(ctx, op, "da", da, a->numel, "a's number of elements"))) ||
        (db && (rc = tr_elem_want_numel(ctx, op, "db", db, b->numel, "b's number of elements"))))
        return rc;
    switch (device) {
    case TR_CPU: {
        tr_elem_view vd, va, vb, vda, vdb;
        if ((rc = tr_elem_view_in(ctx, &vd, dout))) return rc;
        if ((rc = tr_elem_view_in(ctx, &va, a))) goto free_d;
        if ((rc = tr_elem_view_in(ctx, &vb, b))) goto free_a;
        if ((rc = tr_elem_view_out(ctx, &vda, da, 0))) goto free_b;
        if ((rc = tr_elem_view_out(ctx, &vdb, db, 0))) goto free_da;
        mul_backward_f32(vda.p, vdb.p, vd.p, va.p, vb.p, N, C, b_rows);
        tr_elem_view_finish(&vda, da);
        tr_elem_view_finish(&vdb, db);
        tr_elem_view_release(ctx, &vdb);
    free_da:
        tr_elem_view_release(ctx, &vda);
    free_b:
        tr_elem_view_release(ctx, &vb);
    free_a:
        tr_elem_view_release(ctx, &va);
    free_d:
        tr_elem_view_release(ctx, &vd);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

/* ------------------------------------------------------------ scale, axpy, fill */

/* out = alpha * x (accumulate = 0) or out += alpha * x (accumulate = 1). */
static int scaled(tr_ctx *ctx, const char *op, tr_tensor *out, const tr_tensor *x, float alpha, int accumulate)
{
    int rc, device = x ? x->device : TR_CPU;
    if ((rc = tr_elem_want_float(ctx, op, "x", x, device)) ||
        (rc = tr_elem_want_float(ctx, op, accumulate ? "y" : "out", out, device)) ||
        (rc = tr_elem_want_numel(ctx, op, accumulate ? "y" : "out", out, x->numel, "x's number of elements")))
        return rc;
    switch (device) {
    case TR_CPU: {
        tr_elem_view vx, vo;
        if ((rc = tr_elem_view_in(ctx, &vx, x))) return rc;
        if ((rc = tr_elem_view_out(ctx, &vo, out, accumulate))) goto free_x;
        if (accumulate) axpy_f32(vo.p, vx.p, alpha, x->numel);
        else scale_forward_f32(vo.p, vx.p, alpha, x->numel);
        tr_elem_view_finish(&vo, out);
        tr_elem_view_release(ctx, &vo);
    free_x:
        tr_elem_view_release(ctx, &vx);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, device);
    }
}

int tr_op_scale(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float alpha)
{
    return scaled(ctx, "scale", out, x, alpha, 0);
}

int tr_op_axpy(tr_ctx *ctx, tr_tensor *y, const tr_tensor *x, float alpha)
{
    return scaled(ctx, "axpy", y, x, alpha, 1);
}

int tr_op_fill(tr_ctx *ctx, tr_tensor *out, float value)
{
    int rc, device = out ? out->device : TR_CPU;
    if ((rc = tr_elem_want_float(ctx, "fill", "out", out, device))) return rc;
    switch (device) {
    case TR_CPU: {
        tr_elem_view vo;
        if ((rc = tr_elem_view_out(ctx, &vo, out, 0))) return rc;
        fill_f32(vo.p, value, out->numel);
        tr_elem_view_finish(&vo, out);
        tr_elem_view_release(ctx, &vo);
        return TR_OK;
    }
    default:
        return tr_elem_no_device(ctx, "fill", device);
    }
}
