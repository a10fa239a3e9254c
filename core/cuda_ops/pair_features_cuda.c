/* pair_features_cuda.c — the CUDA slots of copy_cols, abs_diff and abs_diff_backward (CPU
 * slots: core/cpu_ops/pair_features_cpu.c): the column blocks and |a - b| that build the feature
 * matrix of a softmax (NLI) loss. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

/* dst[:, dst_col ...] (= or += with accumulate) src[:, src_col ...] */
TR_CSLOT_DEFINE(copy_cols)
static int copy_cols_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dst = c->copy_cols.dst, *src = c->copy_cols.src;
    int64_t N, dC, sN, sC;
    tr_op_rows(dst, &N, &dC);
    tr_op_rows(src, &sN, &sC);
    if (N == 0 || c->i[2] == 0) return TR_OK;
    return tr_k_copy_cols_cuda(dst->data, dst->dtype, src->data, src->dtype, N, dC, c->i[0], sC, c->i[1], c->i[2],
                               (int)c->i[3], s->stream, s->err);
}

TR_CSLOT_DEFINE(abs_diff)
static int abs_diff_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->abs_diff.out, *a = c->abs_diff.a, *b = c->abs_diff.b;
    return tr_k_abs_diff_fwd_cuda(out->data, out->dtype, a->data, a->dtype, b->data, b->dtype, a->numel, s->stream,
                                  s->err);
}

/* da (=) = dout * sign(a - b), db (=) = -da; either may be NULL */
TR_CSLOT_DEFINE(abs_diff_backward)
static int abs_diff_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *da = c->abs_diff_backward.da, *db = c->abs_diff_backward.db, *dout = c->abs_diff_backward.dout,
                    *a = c->abs_diff_backward.a, *b = c->abs_diff_backward.b;
    if (!da && !db) return TR_OK;
    return tr_k_abs_diff_bwd_cuda(da ? da->data : NULL, da ? da->dtype : TR_F32, db ? db->data : NULL,
                                  db ? db->dtype : TR_F32, dout->data, dout->dtype, a->data, a->dtype, b->data,
                                  b->dtype, dout->numel, s->stream, s->err);
}

#endif
