/* elementwise.c — tensor-level add, mul (+ backward), scale, axpy, fill over the
 * kernels in kernels/cpu/elementwise.c. b broadcasts when it is a vector of a's last
 * dimension; every tensor may be f32, bf16 or f16 (computed in f32, block by block, so
 * half tensors need only a few MiB of workspace).
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/elementwise_cpu.c, core/cuda_ops/elementwise_cuda.c. */
#include "ops_elementwise.h"

#include "cpu/elementwise.h"
#include "op_stage.h"
#include "op_table.h"

/* ------------------------------------------------------------ shape checks */

/* Checks the binary op's operands; sets N, C and b_rows (N or 1 for a broadcast b). */
static int binary_shapes(tr_ctx *ctx, const char *op, const tr_tensor *a, const tr_tensor *b, int64_t *N,
                         int64_t *C, int64_t *b_rows)
{
    char sa[160], sb[160];
    tr_op_rows(a, N, C);
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
                   op, tr_op_describe(sb, sizeof sb, b), tr_op_describe(sa, sizeof sa, a), (long long)*C);
}

static int binary_checks(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b,
                         int is_mul)
{
    int rc;
    int64_t N, C, b_rows;
    if ((rc = binary_shapes(ctx, op, a, b, &N, &C, &b_rows))) return rc;
    if ((rc = tr_op_want_numel(ctx, op, "out", out, a->numel, "a's number of elements"))) return rc;
    return TR_OK;
}

static int mul_backward_checks(tr_ctx *ctx, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dout,
                               const tr_tensor *a, const tr_tensor *b)
{
    const char *op = "mul_backward";
    int rc;
    int64_t N, C, b_rows;
    if ((rc = binary_shapes(ctx, op, a, b, &N, &C, &b_rows)) ||
        (rc = tr_op_want_numel(ctx, op, "dout", dout, a->numel, "a's number of elements")) ||
        (da && (rc = tr_op_want_numel(ctx, op, "da", da, a->numel, "a's number of elements"))) ||
        (db && (rc = tr_op_want_numel(ctx, op, "db", db, b->numel, "b's number of elements"))))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ scale, axpy, fill */

static int scaled_checks(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *x, float alpha,
                         int accumulate)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, accumulate ? "y" : "out", out, x->numel, "x's number of elements")))
        return rc;
    return TR_OK;
}

static int fill_checks(tr_ctx *ctx, const tr_tensor *out, float value)
{
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(add, binary_checks, "add", c->add.out, c->add.a, c->add.b, 0)
TR_OP_CHECK_BY(mul, binary_checks, "mul", c->mul.out, c->mul.a, c->mul.b, 1)
TR_OP_CHECK_BY(mul_backward, mul_backward_checks, c->mul_backward.da, c->mul_backward.db, c->mul_backward.dout,
               c->mul_backward.a, c->mul_backward.b)
TR_OP_CHECK_BY(scale, scaled_checks, "scale", c->scale.out, c->scale.x, c->f[0], 0)
TR_OP_CHECK_BY(axpy, scaled_checks, "axpy", c->axpy.y, c->axpy.x, c->f[0], 1)
TR_OP_CHECK_BY(fill, fill_checks, c->fill.out, c->f[0])

/* add, mul: out has a's shape and dtype; scale: x's. */
TR_OP_INFER_LIKE(add, c->add.a, c->add.a->dtype | TR_INFER_CHOOSE)

int tr_infer_mul(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    return tr_infer_add(ctx, c, shape, ndim, dtype);
}

TR_OP_INFER_LIKE(scale, c->scale.x, c->scale.x->dtype | TR_INFER_CHOOSE)

int tr_op_add(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, add, .t = { out, a, b });
}

int tr_op_mul(tr_ctx *ctx, tr_tensor *out, const tr_tensor *a, const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, mul, .t = { out, a, b });
}

int tr_op_mul_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dout, const tr_tensor *a,
                       const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, mul_backward, .t = { da, db, dout, a, b });
}

int tr_op_scale(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float alpha)
{
    return TR_OP_RUN_CALL(ctx, scale, .t = { out, x }, .f = { alpha });
}

int tr_op_axpy(tr_ctx *ctx, tr_tensor *y, const tr_tensor *x, float alpha)
{
    return TR_OP_RUN_CALL(ctx, axpy, .t = { y, x }, .f = { alpha });
}

int tr_op_fill(tr_ctx *ctx, tr_tensor *out, float value)
{
    return TR_OP_RUN_CALL(ctx, fill, .t = { out }, .f = { value });
}
