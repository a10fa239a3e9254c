/* similarity_cuda.c — the CUDA slots of l2norm, cosine_sim and their backwards (CPU slots:
 * core/cpu_ops/similarity_cpu.c). The cosine-similarity matrix is a product of normalised rows
 * through cuBLASLt: sim = an bn^T; its backward dan = dsim bn, dbn = dsim^T an, then back
 * through the normalisation. The normalised rows live in f32 workspace for the op's
 * length. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

static const float cos_eps = 1e-12f; /* torch.nn.functional.normalize's default, as the CPU */

TR_CSLOT_DEFINE(l2norm)
static int l2norm_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->l2norm.out, *x = c->l2norm.x;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    if (x->numel == 0) return TR_OK;
    return tr_k_l2norm_fwd_cuda(out->data, out->dtype, x->data, x->dtype, N, C, c->f[0], s->stream, s->err);
}

/* dx (=) */
TR_CSLOT_DEFINE(l2norm_backward)
static int l2norm_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dx = c->l2norm_backward.dx, *dout = c->l2norm_backward.dout, *x = c->l2norm_backward.x;
    int64_t N, C;
    tr_op_rows(x, &N, &C);
    if (x->numel == 0) return TR_OK;
    return tr_k_l2norm_bwd_cuda(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, N, C, c->f[0],
                                s->stream, s->err);
}

/* *an, *bn = the normalised rows of a [N, C] and b [M, C] in f32 workspace */
static int normalise_both(tr_cslot *s, const tr_tensor *a, const tr_tensor *b, void **an, void **bn)
{
    const int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
    int rc;
    if ((rc = tr_cslot_ws(s, N * C, TR_F32, an)) || (rc = tr_cslot_ws(s, M * C, TR_F32, bn))) return rc;
    if (N > 0 && (rc = tr_k_l2norm_fwd_cuda(*an, TR_F32, a->data, a->dtype, N, C, cos_eps, s->stream, s->err)))
        return rc;
    if (M > 0 && (rc = tr_k_l2norm_fwd_cuda(*bn, TR_F32, b->data, b->dtype, M, C, cos_eps, s->stream, s->err)))
        return rc;
    return TR_OK;
}

/* sim [N, M] (=) */
TR_CSLOT_DEFINE(cosine_sim)
static int cosine_sim_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *sim = c->cosine_sim.sim, *a = c->cosine_sim.a, *b = c->cosine_sim.b;
    const int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
    void *an, *bn;
    int rc;
    if (C == 0) return tr_k_fill_fwd_cuda(sim->data, 0.0f, sim->dtype, sim->numel, s->stream, s->err);
    if ((rc = normalise_both(s, a, b, &an, &bn))) return rc;
    tr_cuda_gemm_desc d = {.m = N, .n = M, .k = C, .batch = 1, .trans_b = 1, .alpha = 1, .beta = 0};
    return tr_cslot_gemm(s, sim->data, sim->dtype, sim->numel, an, TR_F32, N * C, bn, TR_F32, M * C, NULL, TR_F32, d);
}

/* da [N, C] (=), db [M, C] (=), either may be NULL */
TR_CSLOT_DEFINE(cosine_sim_backward)
static int cosine_sim_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *da = c->cosine_sim_backward.da, *db = c->cosine_sim_backward.db,
                    *dsim = c->cosine_sim_backward.dsim, *a = c->cosine_sim_backward.a, *b = c->cosine_sim_backward.b;
    const int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
    void *an, *bn, *dn;
    int rc;
    if (C == 0 || (!da && !db)) return TR_OK;
    if ((rc = normalise_both(s, a, b, &an, &bn))) return rc;
    for (int side = 0; side < 2; side++) {
        const tr_tensor *g = side ? db : da, *x = side ? b : a;
        const int64_t rows = side ? M : N, other = side ? N : M;
        if (!g || rows == 0) continue;
        if ((rc = tr_cslot_ws(s, rows * C, TR_F32, &dn))) return rc;
        if (other > 0) {
            /* dan = dsim bn ([N, M] [M, C]); dbn = dsim^T an (dsim stored [N, M]) */
            tr_cuda_gemm_desc d = {.m = rows, .n = C, .k = other, .batch = 1, .trans_a = side, .alpha = 1, .beta = 0};
            rc = tr_cslot_gemm(s, dn, TR_F32, rows * C, dsim->data, dsim->dtype, dsim->numel, side ? an : bn, TR_F32,
                               other * C, NULL, TR_F32, d);
        } else {
            rc = tr_k_fill_fwd_cuda(dn, 0.0f, TR_F32, rows * C, s->stream, s->err);
        }
        if (rc || (rc = tr_k_l2norm_bwd_cuda(g->data, g->dtype, dn, TR_F32, x->data, x->dtype, rows, C, cos_eps,
                                             s->stream, s->err)))
            return rc;
    }
    return TR_OK;
}

#endif
