/* similarity_cpu.c — the CPU slots (checks and wrappers: core/ops/similarity.c): tensor-level row L2 normalisation and
 * the cosine-similarity matrix over kernels/cpu/similarity.c. The cosine backward recomputes the normalised rows in
 * workspace instead of keeping them from the forward. */
#include "ops_similarity.h"
#include "cpu_slot.h"
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

/* cosine_sim and its backward over whole operands (one row for the staging loop); the
 * normalised rows of a [N, C] and b [M, C] (and, backward, their gradients) in a workspace
 * block (work). */
#define CS(name) TR_ARGI(cosine_sim, name)
#define CB(name) TR_ARGI(cosine_sim_backward, name)

static const unsigned char cos_whole[TR_OP_MAX_TENSORS] = {TR_ROWS_WHOLE, TR_ROWS_WHOLE, TR_ROWS_WHOLE, TR_ROWS_WHOLE,
                                                           TR_ROWS_WHOLE};

/* an, an + N*C = the normalised rows of a and b. */
static void normalise_both(float *an, const float *a, const float *b, int64_t N, int64_t M, int64_t C)
{
    tr_k_l2norm_fwd_f32(an, a, N, C, cos_eps);
    tr_k_l2norm_fwd_f32(an + N * C, b, M, C, cos_eps);
}

static int cos_run(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, const tr_tensor *a, const tr_tensor *b,
                   size_t copies, tr_rows_fn fn)
{
    void *ws;
    int rc =
        tr_stage_scratch(ctx, copies * (size_t)(a->shape[0] + b->shape[0]) * (size_t)a->shape[1] * sizeof(float), &ws);
    if (rc == TR_OK) rc = tr_stage_rows(ctx, d, c, cos_whole, 1, 1, fn, ws);
    tr_stage_scratch_free(ctx, ws);
    return rc;
}

static int cos_fwd_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    const int64_t N = c->cosine_sim.a->shape[0], M = c->cosine_sim.b->shape[0], C = c->cosine_sim.a->shape[1];
    float *an = work;
    normalise_both(an, p[CS(a)], p[CS(b)], N, M, C);
    tr_k_cosine_sim_fwd_f32(p[CS(sim)], an, an + N * C, N, M, C);
    return TR_OK;
}

/* The similarity's gradient, then through the normalisation: d(x / ||x||). */
static int cos_bwd_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    const int64_t N = c->cosine_sim_backward.a->shape[0], M = c->cosine_sim_backward.b->shape[0],
                  C = c->cosine_sim_backward.a->shape[1];
    float *an = work, *bn = an + N * C, *dan = bn + M * C, *dbn = dan + N * C;
    float *da = p[CB(da)], *db = p[CB(db)];
    normalise_both(an, p[CB(a)], p[CB(b)], N, M, C);
    tr_k_cosine_sim_bwd_f32(da ? dan : NULL, db ? dbn : NULL, p[CB(dsim)], an, bn, N, M, C);
    if (da) tr_k_l2norm_bwd_f32(da, dan, p[CB(a)], N, C, cos_eps);
    if (db) tr_k_l2norm_bwd_f32(db, dbn, p[CB(b)], M, C, cos_eps);
    return TR_OK;
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(l2norm, l2norm_run, &tr_opd_l2norm, c, c->l2norm.x, l2norm_rows)
TR_CPU_SLOT_BY(l2norm_backward, l2norm_run, &tr_opd_l2norm_backward, c, c->l2norm_backward.x, l2norm_backward_rows)
TR_CPU_SLOT_BY(cosine_sim, cos_run, &tr_opd_cosine_sim, c, c->cosine_sim.a, c->cosine_sim.b, 1, cos_fwd_whole)
TR_CPU_SLOT_BY(cosine_sim_backward, cos_run, &tr_opd_cosine_sim_backward, c, c->cosine_sim_backward.a,
               c->cosine_sim_backward.b, 2, cos_bwd_whole)
