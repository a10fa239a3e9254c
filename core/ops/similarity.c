/* similarity.c — tensor-level row L2 normalisation and the cosine-similarity matrix
 * over kernels/cpu/similarity.c. The cosine backward recomputes the normalised rows in
 * workspace instead of keeping them from the forward. */
#include "ops_elem.h"

#include "cpu/similarity.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

static const float cos_eps = 1e-12f;   /* torch.nn.functional.normalize's default */

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

/* dx = l2norm_backward(dout, x) (dout non-NULL) or out = l2norm(x), in blocks of rows. */
static int l2norm_blocks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *dout, const tr_tensor *x, float eps)
{
    int rc = TR_OK;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    int64_t rows = tr_stage_block_rows(C);
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
        int64_t nr = N - r0 < rows ? N - r0 : rows, s = r0 * C, len = nr * C;
        tr_stage v[3] = { { 0 } };   /* x, dout, out */
        if (!(rc = tr_stage_in(ctx, &v[0], x, s, len)) &&
            !(rc = dout ? tr_stage_in(ctx, &v[1], dout, s, len) : TR_OK) &&
            !(rc = tr_stage_out(ctx, &v[2], out, s, len, 0))) {
            if (dout) tr_k_l2norm_bwd_f32(v[2].p, v[1].p, v[0].p, nr, C, eps);
            else tr_k_l2norm_fwd_f32(v[2].p, v[0].p, nr, C, eps);
            tr_stage_store(&v[2], out, s);
        }
        for (int i = 0; i < 3; i++) tr_stage_release(ctx, &v[i]);
    }
    return rc;
}

static int l2norm_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *x, float eps)
{
    int rc;
    if ((rc = norm_args(ctx, "l2norm", out, "out", x, NULL, eps))) return rc;
    if (!run) return TR_OK;
    return l2norm_blocks(ctx, out, NULL, x, eps);
}

static int l2norm_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, float eps)
{
    int rc;
    if ((rc = norm_args(ctx, "l2norm_backward", dx, "dx", x, dout, eps))) return rc;
    if (!run) return TR_OK;
    return l2norm_blocks(ctx, dx, dout, x, eps);
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

/* an, bn = normalised rows of a and b in one workspace block (*ws). */
static int normalise_both(tr_ctx *ctx, const tr_tensor *a, const tr_tensor *b, float **an, float **bn, void **ws)
{
    int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
    tr_stage va, vb;
    int rc = tr_stage_scratch(ctx, (size_t)(N + M) * (size_t)C * sizeof(float), ws);
    if (rc) return rc;
    *an = *ws;
    *bn = *an + N * C;
    if ((rc = tr_stage_in_all(ctx, &va, a))) goto fail;
    tr_k_l2norm_fwd_f32(*an, va.p, N, C, cos_eps);
    tr_stage_release(ctx, &va);
    if ((rc = tr_stage_in_all(ctx, &vb, b))) goto fail;
    tr_k_l2norm_fwd_f32(*bn, vb.p, M, C, cos_eps);
    tr_stage_release(ctx, &vb);
    return TR_OK;
fail:
    tr_stage_scratch_free(ctx, *ws);
    *ws = NULL;
    return rc;
}

static int cosine_sim_impl(tr_ctx *ctx, int run, const tr_tensor *sim, const tr_tensor *a, const tr_tensor *b)
{
    int rc;
    if ((rc = sim_args(ctx, "cosine_sim", sim, "sim", a, b))) return rc;
    if (!run) return TR_OK;
    {
        float *an, *bn;
        void *ws;
        tr_stage vs;
        if ((rc = normalise_both(ctx, a, b, &an, &bn, &ws))) return rc;
        if ((rc = tr_stage_out_all(ctx, &vs, sim, 0)) == TR_OK) {
            tr_k_cosine_sim_fwd_f32(vs.p, an, bn, a->shape[0], b->shape[0], a->shape[1]);
            tr_stage_store_all(&vs, sim);
            tr_stage_release(ctx, &vs);
        }
        tr_stage_scratch_free(ctx, ws);
        return rc;
    }
}

static int cosine_sim_backward_impl(tr_ctx *ctx, int run, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dsim, const tr_tensor *a,
                              const tr_tensor *b)
{
    const char *op = "cosine_sim_backward";
    int rc;
    if ((rc = sim_args(ctx, op, dsim, "dsim", a, b)) ||
        (da && ((rc = tr_op_want_numel(ctx, op, "da", da, a->numel, "a's number of elements")))) ||
        (db && ((rc = tr_op_want_numel(ctx, op, "db", db, b->numel, "b's number of elements")))))
        return rc;
    if (!run) return TR_OK;
    {
        int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
        float *an, *bn;
        void *ws, *dws = NULL;
        tr_stage vs, vx, vg;
        if ((rc = normalise_both(ctx, a, b, &an, &bn, &ws))) return rc;
        if ((rc = tr_stage_in_all(ctx, &vs, dsim))) goto free_ws;
        if ((rc = tr_stage_scratch(ctx, (size_t)(N + M) * (size_t)C * sizeof(float), &dws))) goto free_s;
        float *dan = dws, *dbn = dan + N * C;
        tr_k_cosine_sim_bwd_f32(da ? dan : NULL, db ? dbn : NULL, vs.p, an, bn, N, M, C);
        /* through the normalisation: d(x / ||x||) */
        for (int side = 0; side < 2; side++) {
            const tr_tensor *g = side ? db : da;
            const tr_tensor *x = side ? b : a;
            if (!g) continue;
            if ((rc = tr_stage_in_all(ctx, &vx, x))) goto free_d;
            if ((rc = tr_stage_out_all(ctx, &vg, g, 0)) == TR_OK) {
                tr_k_l2norm_bwd_f32(vg.p, side ? dbn : dan, vx.p, side ? M : N, C, cos_eps);
                tr_stage_store_all(&vg, g);
                tr_stage_release(ctx, &vg);
            }
            tr_stage_release(ctx, &vx);
            if (rc) goto free_d;
        }
    free_d:
        tr_stage_scratch_free(ctx, dws);
    free_s:
        tr_stage_release(ctx, &vs);
    free_ws:
        tr_stage_scratch_free(ctx, ws);
        return rc;
    }
}

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(l2norm, c->t[0], c->t[1], c->f[0])
TR_OP_IMPL_SLOTS(l2norm_backward, c->t[0], c->t[1], c->t[2], c->f[0])
TR_OP_IMPL_SLOTS(cosine_sim, c->t[0], c->t[1], c->t[2])
TR_OP_IMPL_SLOTS(cosine_sim_backward, c->t[0], c->t[1], c->t[2], c->t[3], c->t[4])

#define F(n, r) { n, r, TR_DT_FLOAT, 0 }
#define F_OPT(n, r) { n, r, TR_DT_FLOAT, 1 }

const tr_op_desc tr_opd_l2norm = { "l2norm", 2, { F("out", TR_ARG_OUT), F("x", TR_ARG_IN) },
                                   l2norm_check, { l2norm_cpu, TR_CUDA_SLOT(l2norm) } };
const tr_op_desc tr_opd_l2norm_backward = {
    "l2norm_backward", 3, { F("dx", TR_ARG_OUT), F("dout", TR_ARG_IN), F("x", TR_ARG_IN) },
    l2norm_backward_check, { l2norm_backward_cpu, TR_CUDA_SLOT(l2norm_backward) } };
const tr_op_desc tr_opd_cosine_sim = { "cosine_sim", 3, { F("sim", TR_ARG_OUT), F("a", TR_ARG_IN), F("b", TR_ARG_IN) },
                                       cosine_sim_check, { cosine_sim_cpu, TR_CUDA_SLOT(cosine_sim) } };
const tr_op_desc tr_opd_cosine_sim_backward = {
    "cosine_sim_backward", 5,
    { F_OPT("da", TR_ARG_OUT), F_OPT("db", TR_ARG_OUT), F("dsim", TR_ARG_IN), F("a", TR_ARG_IN), F("b", TR_ARG_IN) },
    cosine_sim_backward_check, { cosine_sim_backward_cpu, TR_CUDA_SLOT(cosine_sim_backward) } };

int tr_op_l2norm(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float eps)
{
    tr_op_call c = { .t = { out, x }, .f = { eps } };
    return tr_op_run(ctx, &tr_opd_l2norm, &c);
}

int tr_op_l2norm_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, float eps)
{
    tr_op_call c = { .t = { dx, dout, x }, .f = { eps } };
    return tr_op_run(ctx, &tr_opd_l2norm_backward, &c);
}

int tr_op_cosine_sim(tr_ctx *ctx, tr_tensor *sim, const tr_tensor *a, const tr_tensor *b)
{
    tr_op_call c = { .t = { sim, a, b } };
    return tr_op_run(ctx, &tr_opd_cosine_sim, &c);
}

int tr_op_cosine_sim_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dsim, const tr_tensor *a,
                              const tr_tensor *b)
{
    tr_op_call c = { .t = { da, db, dsim, a, b } };
    return tr_op_run(ctx, &tr_opd_cosine_sim_backward, &c);
}
