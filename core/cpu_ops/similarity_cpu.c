/* similarity_cpu.c — the CPU slots (checks and wrappers: core/ops/similarity.c): tensor-level row L2 normalisation and
 * the cosine-similarity matrix over kernels/cpu/similarity.c. The cosine backward recomputes the normalised rows in
 * workspace instead of keeping them from the forward. */
#include "ops_elem.h"
#include "cpu_slot.h"
#include "stage_rows.h"
#include "cpu/similarity.h"

static const float cos_eps = 1e-12f; /* torch.nn.functional.normalize's default */

/* out = l2norm(x) and dx = l2norm_backward(dout, x) over blocks of rows of x's last dim:
 * l2norm's (out, x) and its backward's (dx, dout, x) in the staging loop's places. */
static const unsigned char l2norm_layout[TR_OP_MAX_TENSORS] = {TR_ROWS_BLOCK, TR_ROWS_BLOCK, TR_ROWS_BLOCK};

static int l2norm_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_l2norm_fwd_f32(p[0], p[1], nr, C, c->f[0]);
    return TR_OK;
}

static int l2norm_backward_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_l2norm_bwd_f32(p[0], p[1], p[2], nr, C, c->f[0]);
    return TR_OK;
}

static int l2norm_run(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, const tr_tensor *x, tr_rows_fn fn)
{
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    return tr_stage_rows(ctx, d, c, l2norm_layout, N, C, fn, NULL);
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

static int cosine_sim_run(tr_ctx *ctx, const tr_tensor *sim, const tr_tensor *a, const tr_tensor *b)
{
    int rc;
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

static int cosine_sim_backward_run(tr_ctx *ctx, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dsim,
                                   const tr_tensor *a, const tr_tensor *b)
{
    int rc;
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

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(l2norm, l2norm_run, &tr_opd_l2norm, c, c->l2norm.x, l2norm_rows)
TR_CPU_SLOT_BY(l2norm_backward, l2norm_run, &tr_opd_l2norm_backward, c, c->l2norm_backward.x, l2norm_backward_rows)
TR_CPU_SLOT_BY(cosine_sim, cosine_sim_run, c->cosine_sim.sim, c->cosine_sim.a, c->cosine_sim.b)
TR_CPU_SLOT_BY(cosine_sim_backward, cosine_sim_backward_run, c->cosine_sim_backward.da, c->cosine_sim_backward.db,
               c->cosine_sim_backward.dsim, c->cosine_sim_backward.a, c->cosine_sim_backward.b)
