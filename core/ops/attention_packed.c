/* attention_packed.c — attention over sequences stored back to back (the packed rows of
 * trainer.nn.packing), forward only: `attention_packed`.
 *
 * Why: the encoder skips padding in every per-row op, but `attention` reads the padded
 * [B, T, H, D] layout, so a forward without gradients scattered q, k and v to it and gathered
 * the output back: four copies a layer, 4 % of an encode pass. Here sequence b is rows
 * off[b] .. off[b+1]-1 of q, k, v and out [N, H, D] and attends over its own rows; no mask,
 * no dropout (the padded op keeps both, and the backward).
 *
 * Bits: for a padded batch of length T whose mask keeps a prefix of each row (what
 * tokenizers give) the result equals `attention` on the scattered layout, bit for bit, so a
 * forward without gradients (`trainer encode`, the first pass of checkpointing or GradCache)
 * matches its replay with gradients, which runs the padded op. The op makes the padded op's
 * choice for that T:
 *   - T <= 32 (8 on AVX2), head dim 32 or 64: the short-row kernel per head
 *     (kernels/cpu/attn_short.h), reading the packed rows in place;
 *   - otherwise the op scatters to a padded [B, T] workspace with that prefix mask and runs
 *     the padded kernel itself.
 * lse (=) is f32 [H * N]: sequence b, head h, query i at H*off[b] + h*n_b + i (the padded
 * op's [1, H, n_b] block of each sequence, back to back). Half tensors are staged to f32.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/attention_packed_cpu.c. */
#include "ops_nn.h"
#include "op_stage.h"
#include "op_table.h"
#include "cpu/attention.h"
#include "cpu/attn_short.h"
#include "cpu/attn_tile.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* Checks the shapes against the lengths and records H, D and the padded layout's T in
 * c->dim[0..2] for the slots. */
int tr_check_attention_packed(tr_ctx *ctx, tr_op_call *c)
{
    static const char *op = "attention_packed";
    const tr_tensor *out = c->attention_packed.out, *lse = c->attention_packed.lse, *q = c->attention_packed.q,
                    *k = c->attention_packed.k, *v = c->attention_packed.v;
    const tr_attn_lengths *L = c->p;
    char s1[160];
    int rc;
    if (!L || L->B < 0 || (L->B > 0 && !L->len))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: the sequence lengths are missing; pass one length per sequence (trainer.nn.packing "
                       "makes them)", op);
    if (q->ndim != 3)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: q has shape %s but must be [N, H, D] (the packed rows of the projections, viewed "
                       "as heads)", op, tr_op_shape(q, s1));
    int64_t N = 0, mx = 0;
    for (int64_t b = 0; b < L->B; b++) {
        if (L->len[b] < 0)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: sequence %lld has length %lld; lengths must be >= 0", op,
                           (long long)b, (long long)L->len[b]);
        N += L->len[b];
        mx = L->len[b] > mx ? L->len[b] : mx;
    }
    if (N != q->shape[0])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: the %lld sequence lengths sum to %lld but q has %lld rows (shape %s); they must be equal",
                       op, (long long)L->B, (long long)N, (long long)q->shape[0], tr_op_shape(q, s1));
    if ((rc = tr_op_want_shape(ctx, op, "k", k, 3, q->shape)) || (rc = tr_op_want_shape(ctx, op, "v", v, 3, q->shape)) ||
        (rc = tr_op_want_shape(ctx, op, "out", out, 3, q->shape)))
        return rc;
    if (L->T > 0 && mx > L->T)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: a sequence has %lld rows but the padded length is %lld; each length must be at most it",
                       op, (long long)mx, (long long)L->T);
    const int64_t H = q->shape[1], D = q->shape[2];
    if ((rc = tr_op_want_numel(ctx, op, "lse", lse, H * N, "H * N: each sequence's [H, n] block")) != TR_OK)
        return rc;
    if (mx > INT_MAX / 64 || H * D > INT_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: a sequence of %lld rows or %lld x %lld heads is beyond the "
                       "BLAS index limit", op, (long long)mx, (long long)H, (long long)D);
    c->dim[0] = H;
    c->dim[1] = D;
    c->dim[2] = L->T > 0 ? L->T : mx;
    return TR_OK;
}

int tr_op_attention_packed(tr_ctx *ctx, tr_tensor *out, tr_tensor *lse, const tr_tensor *q, const tr_tensor *k,
                           const tr_tensor *v, const int64_t *lengths, int64_t nseq, int64_t padded_len, float scale)
{
    tr_attn_lengths L = { nseq, lengths, padded_len };
    tr_op_call c = { .t = { out, lse, q, k, v }, .f = { scale }, .p = &L };
    return tr_op_run(ctx, &tr_opd_attention_packed, &c);
}
