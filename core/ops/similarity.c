/* similarity.c — tensor-level row L2 normalisation and the cosine-similarity matrix
 * over kernels/cpu/similarity.c. The cosine backward recomputes the normalised rows in
 * workspace instead of keeping them from the forward.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/similarity_cpu.c, core/cuda_ops/similarity_cuda.c. */
#include "ops_similarity.h"

#include "cpu/similarity.h"
#include "op_stage.h"
#include "op_table.h"

/* ------------------------------------------------------------ l2 normalisation */

static int norm_args(tr_ctx *ctx, const char *op, const tr_tensor *out, const char *out_name, const tr_tensor *x,
                     const tr_tensor *dout, float eps)
{
    int rc;
    if ((rc = tr_op_want_numel(ctx, op, out_name, out, x->numel, "x's number of elements")) ||
        (dout && ((rc = tr_op_want_numel(ctx, op, "dout", dout, x->numel, "x's number of elements")))))
        return rc;
    if (!(eps > 0)) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: eps = %g must be > 0", op, (double)eps);
    return TR_OK;
}

static int l2norm_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *x, float eps)
{
    int rc;
    if ((rc = norm_args(ctx, "l2norm", out, "out", x, NULL, eps))) return rc;
    return TR_OK;
}

static int l2norm_backward_checks(tr_ctx *ctx, const tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x,
                                  float eps)
{
    int rc;
    if ((rc = norm_args(ctx, "l2norm_backward", dx, "dx", x, dout, eps))) return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ cosine similarity */

static int sim_args(tr_ctx *ctx, const char *op, const tr_tensor *sim, const char *sim_name, const tr_tensor *a,
                    const tr_tensor *b)
{
    char s1[160], s2[160];
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: a has shape %s and b %s; both must be [rows, dim] with one dim",
                       op, tr_op_describe(s1, sizeof s1, a), tr_op_describe(s2, sizeof s2, b));
    return tr_op_want_numel(ctx, op, sim_name, sim, a->shape[0] * b->shape[0], "rows of a * rows of b");
}

static int cosine_sim_checks(tr_ctx *ctx, const tr_tensor *sim, const tr_tensor *a, const tr_tensor *b)
{
    int rc;
    if ((rc = sim_args(ctx, "cosine_sim", sim, "sim", a, b))) return rc;
    return TR_OK;
}

static int cosine_sim_backward_checks(tr_ctx *ctx, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dsim,
                                      const tr_tensor *a, const tr_tensor *b)
{
    const char *op = "cosine_sim_backward";
    int rc;
    if ((rc = sim_args(ctx, op, dsim, "dsim", a, b)) ||
        (da && ((rc = tr_op_want_numel(ctx, op, "da", da, a->numel, "a's number of elements")))) ||
        (db && ((rc = tr_op_want_numel(ctx, op, "db", db, b->numel, "b's number of elements")))))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(l2norm, l2norm_checks, c->l2norm.out, c->l2norm.x, c->f[0])
TR_OP_CHECK_BY(l2norm_backward, l2norm_backward_checks, c->l2norm_backward.dx, c->l2norm_backward.dout,
               c->l2norm_backward.x, c->f[0])
TR_OP_CHECK_BY(cosine_sim, cosine_sim_checks, c->cosine_sim.sim, c->cosine_sim.a, c->cosine_sim.b)
TR_OP_CHECK_BY(cosine_sim_backward, cosine_sim_backward_checks, c->cosine_sim_backward.da, c->cosine_sim_backward.db,
               c->cosine_sim_backward.dsim, c->cosine_sim_backward.a, c->cosine_sim_backward.b)

/* l2norm: x's shape and dtype; its backward: x's shape, dout's dtype; cosine_sim: [N, M]
 * f32; its backward: a's and b's shapes, f32. */
TR_OP_INFER_LIKE(l2norm, c->l2norm.x, c->l2norm.x->dtype | TR_INFER_CHOOSE)

TR_OP_INFER_LIKE(l2norm_backward, c->l2norm_backward.x, c->l2norm_backward.dout->dtype)

int tr_infer_cosine_sim(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *a = c->cosine_sim.a, *b = c->cosine_sim.b;
    int64_t dims[2] = {a->ndim ? a->shape[0] : 1, b->ndim ? b->shape[0] : 1};
    tr_op_infer_dims(shape, ndim, dtype, 0, 2, dims, TR_F32);
    return TR_OK;
}

int tr_infer_cosine_sim_backward(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    tr_op_infer_like(shape, ndim, dtype, 0, c->cosine_sim_backward.a, TR_F32);
    tr_op_infer_like(shape, ndim, dtype, 1, c->cosine_sim_backward.b, TR_F32);
    return TR_OK;
}

int tr_op_l2norm(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float eps)
{
    return TR_OP_RUN_CALL(ctx, l2norm, .t = { out, x }, .f = { eps });
}

int tr_op_l2norm_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, float eps)
{
    return TR_OP_RUN_CALL(ctx, l2norm_backward, .t = { dx, dout, x }, .f = { eps });
}

int tr_op_cosine_sim(tr_ctx *ctx, tr_tensor *sim, const tr_tensor *a, const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, cosine_sim, .t = { sim, a, b });
}

int tr_op_cosine_sim_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dsim, const tr_tensor *a,
                              const tr_tensor *b)
{
    return TR_OP_RUN_CALL(ctx, cosine_sim_backward, .t = { da, db, dsim, a, b });
}
