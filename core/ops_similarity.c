/* ops_similarity.c — tensor-level row L2 normalisation and the cosine-similarity matrix
 * over kernels/cpu/similarity.c. The cosine backward recomputes the normalised rows in
 * workspace instead of keeping them from the forward. */
#include "ops_elem.h"

#include "cpu/similarity.h"
#include "ops_elem_common.h"

static const float cos_eps = 1e-12f;   /* torch.nn.functional.normalize's default */

/* ------------------------------------------------------------ l2 normalisation */

static int norm_args(tr_ctx *ctx, const char *op, const tr_tensor *out, const char *out_name, const tr_tensor *x,
                     const tr_tensor *dout, float eps)
{
    int rc, device = x ? x->device : TR_CPU;
    if ((rc = tr_elem_want_float(ctx, op, "x", x, device)) ||
        (rc = tr_elem_want_float(ctx, op, out_name, out, device)) ||
        (rc = tr_elem_want_numel(ctx, op, out_name, out, x->numel, "x's number of elements")) ||
        (dout && ((rc = tr_elem_want_float(ctx, op, "dout", dout, device)) ||
                  (rc = tr_elem_want_numel(ctx, op, "dout", dout, x->numel, "x's number of elements")))))
        return rc;
    if (!(eps > 0)) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: eps = %g must be > 0", op, (double)eps);
    return TR_OK;
}

/* dx = l2norm_backward(dout, x) (dout non-NULL) or out = l2norm(x), in blocks of rows. */
static int l2norm_blocks(tr_ctx *ctx, tr_tensor *out, const tr_tensor *dout, const tr_tensor *x, float eps)
{
    int rc = TR_OK;
    int64_t N, C;
    tr_elem_rows(x, &N, &C);
    int64_t rows = tr_elem_block_rows(C);
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
        int64_t nr = N - r0 < rows ? N - r0 : rows, s = r0 * C, len = nr * C;
        tr_elem_view v[3] = { { 0 } };   /* x, dout, out */
        if (!(rc = tr_elem_view_in_range(ctx, &v[0], x, s, len)) &&
            !(rc = dout ? tr_elem_view_in_range(ctx, &v[1], dout, s, len) : TR_OK) &&
            !(rc = tr_elem_view_out_range(ctx, &v[2], out, s, len, 0))) {
            if (dout) tr_k_l2norm_bwd_f32(v[2].p, v[1].p, v[0].p, nr, C, eps);
            else tr_k_l2norm_fwd_f32(v[2].p, v[0].p, nr, C, eps);
            tr_elem_view_finish_range(&v[2], out, s);
        }
        for (int i = 0; i < 3; i++) tr_elem_view_release(ctx, &v[i]);
    }
    return rc;
}

int tr_op_l2norm(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float eps)
{
    int rc;
    if ((rc = norm_args(ctx, "l2norm", out, "out", x, NULL, eps))) return rc;
    switch (x->device) {
    case TR_CPU:
        return l2norm_blocks(ctx, out, NULL, x, eps);
    default:
        return tr_elem_no_device(ctx, "l2norm", x->device);
    }
}

int tr_op_l2norm_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, float eps)
{
    int rc;
    if ((rc = norm_args(ctx, "l2norm_backward", dx, "dx", x, dout, eps))) return rc;
    switch (x->device) {
    case TR_CPU:
        return l2norm_blocks(ctx, dx, dout, x, eps);
    default:
        return tr_elem_no_device(ctx, "l2norm_backward", x->device);
    }
}

/* ------------------------------------------------------------ cosine similarity */

static int sim_args(tr_ctx *ctx, const char *op, const tr_tensor *sim, const char *sim_name, const tr_tensor *a,
                    const tr_tensor *b)
{
    int rc, device = a ? a->device : TR_CPU;
    char s1[160], s2[160];
    if ((rc = tr_elem_want_float(ctx, op, "a", a, device)) || (rc = tr_elem_want_float(ctx, op, "b", b, device)) ||
        (rc = tr_elem_want_float(ctx, op, sim_name, sim, device)))
        return rc;
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: a has shape %s and b %s; both must be [rows, dim] with one dim",
                       op, tr_elem_describe(s1, sizeof s1, a), tr_elem_describe(s2, sizeof s2, b));
    return tr_elem_want_numel(ctx, op, sim_name, sim, a->shape[0] * b->shape[0], "rows of a * rows of b");
}

/* an, bn = normalised rows of a and b in one workspace block (*ws). */
static int normalise_both(tr_ctx *ctx, const tr_tensor *a, const tr_tensor *b, float **an, float **bn, void **ws)
{
    int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
    tr_elem_view va, vb;
    int rc = tr_elem_ws_alloc(ctx, (size_t)(N + M) * (size_t)C * sizeof(float), ws);
    if (rc) return rc;
    *an = *ws;
    *bn = *an + N * C;
    if ((rc = tr_elem_view_in(ctx, &va, a))) goto fail;
    tr_k_l2norm_fwd_f32(*an, va.p, N, C, cos_eps);
    tr_elem_view_release(ctx, &va);
    if ((rc = tr_elem_view_in(ctx, &vb, b))) goto fail;
    tr_k_l2norm_fwd_f32(*bn, vb.p, M, C, cos_eps);
    tr_elem_view_release(ctx, &vb);
    return TR_OK;
fail:
    tr_elem_ws_free(ctx, *ws);
    *ws = NULL;
    return rc;
}

int tr_op_cosine_sim(tr_ctx *ctx, tr_tensor *sim, const tr_tensor *a, const tr_tensor *b)
{
    int rc;
    if ((rc = sim_args(ctx, "cosine_sim", sim, "sim", a, b))) return rc;
    switch (a->device) {
    case TR_CPU: {
        float *an, *bn;
        void *ws;
        tr_elem_view vs;
        if ((rc = normalise_both(ctx, a, b, &an, &bn, &ws))) return rc;
        if ((rc = tr_elem_view_out(ctx, &vs, sim, 0)) == TR_OK) {
            tr_k_cosine_sim_fwd_f32(vs.p, an, bn, a->shape[0], b->shape[0], a->shape[1]);
            tr_elem_view_finish(&vs, sim);
            tr_elem_view_release(ctx, &vs);
        }
        tr_elem_ws_free(ctx, ws);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, "cosine_sim", a->device);
    }
}

int tr_op_cosine_sim_backward(tr_ctx *ctx, tr_tensor *da, tr_tensor *db, const tr_tensor *dsim, const tr_tensor *a,
                              const tr_tensor *b)
{
    const char *op = "cosine_sim_backward";
    int rc;
    if ((rc = sim_args(ctx, op, dsim, "dsim", a, b)) ||
        (da && ((rc = tr_elem_want_float(ctx, op, "da", da, a->device)) ||
                (rc = tr_elem_want_numel(ctx, op, "da", da, a->numel, "a's number of elements")))) ||
        (db && ((rc = tr_elem_want_float(ctx, op, "db", db, a->device)) ||
                (rc = tr_elem_want_numel(ctx, op, "db", db, b->numel, "b's number of elements")))))
        return rc;
    switch (a->device) {
    case TR_CPU: {
        int64_t N = a->shape[0], M = b->shape[0], C = a->shape[1];
        float *an, *bn;
        void *ws, *dws = NULL;
        tr_elem_view vs, vx, vg;
        if ((rc = normalise_both(ctx, a, b, &an, &bn, &ws))) return rc;
        if ((rc = tr_elem_view_in(ctx, &vs, dsim))) goto free_ws;
        if ((rc = tr_elem_ws_alloc(ctx, (size_t)(N + M) * (size_t)C * sizeof(float), &dws))) goto free_s;
        float *dan = dws, *dbn = dan + N * C;
        tr_k_cosine_sim_bwd_f32(da ? dan : NULL, db ? dbn : NULL, vs.p, an, bn, N, M, C);
        /* through the normalisation: d(x / ||x||) */
        for (int side = 0; side < 2; side++) {
            tr_tensor *g = side ? db : da;
            const tr_tensor *x = side ? b : a;
            if (!g) continue;
            if ((rc = tr_elem_view_in(ctx, &vx, x))) goto free_d;
            if ((rc = tr_elem_view_out(ctx, &vg, g, 0)) == TR_OK) {
                tr_k_l2norm_bwd_f32(vg.p, side ? dbn : dan, vx.p, side ? M : N, C, cos_eps);
                tr_elem_view_finish(&vg, g);
                tr_elem_view_release(ctx, &vg);
            }
            tr_elem_view_release(ctx, &vx);
            if (rc) goto free_d;
        }
    free_d:
        tr_elem_ws_free(ctx, dws);
    free_s:
        tr_elem_view_release(ctx, &vs);
    free_ws:
        tr_elem_ws_free(ctx, ws);
        return rc;
    }
    default:
        return tr_elem_no_device(ctx, op, a->device);
    }
}
