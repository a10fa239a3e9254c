/* attention.c — tensor-level scaled-dot-product attention (kernels/cpu/attention.c).
 *
 * The kernel's per-thread scratch (threads x (3 x 64 x Tp + 2 x D x Tp + 5 x Tp + 64) floats,
 * Tp = T rounded up to 16: the block buffers and the head's packed k^T and v^T;
 * tr_k_attention_scratch_elems) comes from the allocator with tag workspace, so it is
 * visible in the memory ledger. f32 tensors run in one kernel call over the whole batch,
 * bf16 ones too (converted head by head inside the kernel); f16 ones are staged to f32 a
 * group of batch elements at a time (attention is independent per batch element), with the
 * dropout stream offset by the group's first element so that element (b, h, i, j) always
 * draws element ((b*H + h)*T + i)*T + j of the key's stream.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/attention_cpu.c, core/cuda_ops/attention_cuda.c. */
#include "ops_nn.h"
#include "op_table.h"

#include <limits.h>

/* ------------------------------------------------------------ checks */

typedef struct attn_dims {
    int64_t B, T, H, D;
} attn_dims;

static int check_args(tr_ctx *ctx, const char *op, const tr_tensor *const *bthd,
                      const char *const *names, int n, const tr_tensor *lse, const tr_tensor *mask,
                      float dropout_p, const tr_rng_key *key, attn_dims *d)
{
    char s1[160], s2[160];
    int rc;
    const tr_tensor *q = bthd[0];
    if (q->ndim != 4)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s has shape %s but must be [B, T, H, D]; reshape the [B, T, H*D] "
                       "projection output to 4 dims (a free view)",
                       op, names[0], tr_op_shape(q, s1));
    for (int i = 1; i < n; i++)
        if ((rc = tr_op_want_shape(ctx, op, names[i], bthd[i], 4, q->shape))) return rc;
    *d = (attn_dims){ q->shape[0], q->shape[1], q->shape[2], q->shape[3] };
    int64_t want[3] = { d->B, d->H, d->T };
    if ((rc = tr_op_want_shape(ctx, op, "lse", lse, 3, want))) return rc;
    if (mask) {
        if (mask->dtype != TR_I32 && mask->dtype != TR_F32)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: mask has dtype %s but must be i32 or f32 (1 = keep, 0 = pad)", op,
                           tr_dtype_name(mask->dtype));
        int64_t bt[2] = { d->B, d->T };
        if ((rc = tr_op_want_shape(ctx, op, "mask", mask, 2, bt))) return rc;
    }
    if (!(dropout_p >= 0 && dropout_p < 1))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: dropout_p = %g must be in [0, 1) (attention_probs_dropout_prob)", op,
                       (double)dropout_p);
    if (dropout_p > 0 && !key)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: dropout_p = %g needs an RNG key, which is NULL", op, (double)dropout_p);
    if (d->T > INT_MAX / 64 || d->H * d->D > INT_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s has shape %s, beyond the BLAS index limit; shorten T or H*D", op,
                       names[0], tr_op_shape(q, s2));
    return TR_OK;
}

/* The relative-position bias table [num_buckets, H] (a float dtype; the gradient f32: the
 * dtype rules check those), its gradient of the same shape, the bucketing's scalars, the
 * window and the query rows. */
static int check_position(tr_ctx *ctx, const char *op, const tr_tensor *q, const tr_tensor *rel_bias,
                          const tr_tensor *drel_bias, int64_t max_distance, int64_t bidirectional, int64_t window,
                          int64_t query_rows)
{
    char s1[160];
    int rc;
    if (query_rows < 0 || query_rows > q->shape[1])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: query_rows = %lld must be in [0, T = %lld] (0: every query; n: the first n of each "
                       "sequence)", op, (long long)query_rows, (long long)q->shape[1]);
    if (window < 0)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: window = %lld must be >= 0 (0: every key; w: keys within w positions)", op,
                       (long long)window);
    if (window > 0 && rel_bias)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: window = %lld with a relative-position bias table: the two are not built together; "
                       "pass window = 0 or no rel_bias", op, (long long)window);
    if (drel_bias && !rel_bias)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: drel_bias is given but rel_bias is NULL", op);
    if (!rel_bias) return TR_OK;
    if (rel_bias->ndim != 2 || rel_bias->shape[0] < 1 || rel_bias->shape[1] != q->shape[2])
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: rel_bias has shape %s but must be [num_buckets, H] with H = %lld (the heads of q)", op,
                       tr_op_shape(rel_bias, s1), (long long)q->shape[2]);
    if (drel_bias && (rc = tr_op_want_shape(ctx, op, "drel_bias", drel_bias, 2, rel_bias->shape))) return rc;
    if (max_distance < 1 || max_distance > INT_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: max_distance = %lld must be >= 1 (the bucketing's relative_attention_max_distance)",
                       op, (long long)max_distance);
    if (bidirectional != 0 && bidirectional != 1)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: bidirectional = %lld must be 0 or 1", op,
                       (long long)bidirectional);
    int64_t nb = rel_bias->shape[0], side = bidirectional ? nb / 2 : nb;
    if (side < 2 || nb > INT_MAX / 4)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: rel_bias has %lld buckets; the bucketing needs >= %d (%s)", op, (long long)nb,
                       bidirectional ? 4 : 2, bidirectional ? "bidirectional" : "one-directional");
    if (max_distance <= side / 2)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: max_distance = %lld must exceed the %lld exact buckets of a side (num_buckets %lld%s)", op,
                       (long long)max_distance, (long long)(side / 2), (long long)nb,
                       bidirectional ? ", bidirectional: half a side each way" : "");
    return TR_OK;
}

/* ------------------------------------------------------------ forward */

static int attention_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *lse, const tr_tensor *q,
                            const tr_tensor *k, const tr_tensor *v, const tr_tensor *mask, float scale, float dropout_p,
                            const tr_rng_key *key, const tr_tensor *rel_bias, const int64_t *pos)
{
    static const char *op = "attention";
    const tr_tensor *ts[] = { q, k, v, out, lse, mask };
    const char *names[] = { "q", "k", "v", "out", "lse", "mask" };
    int rc;
    attn_dims d;
    if ((rc = check_args(ctx, op, ts, names, 4, lse, mask, dropout_p, key, &d))) return rc;
    return check_position(ctx, op, q, rel_bias, NULL, pos[0], pos[1], pos[2], pos[3]);
}

/* ------------------------------------------------------------ backward */

static int attention_backward_checks(tr_ctx *ctx, const tr_tensor *dq, const tr_tensor *dk, const tr_tensor *dv,
                                     const tr_tensor *dout, const tr_tensor *q, const tr_tensor *k, const tr_tensor *v,
                                     const tr_tensor *out, const tr_tensor *lse, const tr_tensor *mask, float scale,
                                     float dropout_p, const tr_rng_key *key, const tr_tensor *drel_bias,
                                     const tr_tensor *rel_bias, const int64_t *pos)
{
    static const char *op = "attention_backward";
    const tr_tensor *ts[] = { q, k, v, dout, dq, dk, dv, out };
    const char *names[] = { "q", "k", "v", "dout", "dq", "dk", "dv", "out" };
    int rc;
    attn_dims d;
    if ((rc = check_args(ctx, op, ts, names, out ? 8 : 7, lse, mask, dropout_p, key, &d))) return rc;
    return check_position(ctx, op, q, rel_bias, drel_bias, pos[0], pos[1], pos[2], pos[3]);
}

/* ------------------------------------------------------------ the op table */

int tr_check_attention(tr_ctx *ctx, tr_op_call *c)
{
    return attention_checks(ctx, c->attention.out, c->attention.lse, c->attention.q, c->attention.k, c->attention.v,
                            c->attention.mask, c->f[0], c->f[1], c->p, c->attention.rel_bias, c->i);
}

int tr_check_attention_backward(tr_ctx *ctx, tr_op_call *c)
{
    return attention_backward_checks(ctx, c->attention_backward.dq, c->attention_backward.dk, c->attention_backward.dv,
                                     c->attention_backward.dout, c->attention_backward.q, c->attention_backward.k,
                                     c->attention_backward.v, c->attention_backward.out, c->attention_backward.lse,
                                     c->attention_backward.mask, c->f[0], c->f[1], c->p,
                                     c->attention_backward.drel_bias, c->attention_backward.rel_bias, c->i);
}

int tr_op_attention(tr_ctx *ctx, tr_tensor *out, tr_tensor *lse, const tr_tensor *q, const tr_tensor *k,
                    const tr_tensor *v, const tr_tensor *mask, float scale, float dropout_p, const tr_rng_key *key,
                    const tr_tensor *rel_bias, int max_distance, int bidirectional, int window, int query_rows)
{
    tr_op_call c = { .t = { out, lse, q, k, v, mask, rel_bias },
                     .f = { scale, dropout_p },
                     .i = { max_distance, bidirectional, window, query_rows },
                     .p = key };
    return tr_op_run(ctx, &tr_opd_attention, &c);
}

int tr_op_attention_backward(tr_ctx *ctx, tr_tensor *dq, tr_tensor *dk, tr_tensor *dv, const tr_tensor *dout,
                             const tr_tensor *q, const tr_tensor *k, const tr_tensor *v, const tr_tensor *out,
                             const tr_tensor *lse, const tr_tensor *mask, float scale, float dropout_p,
                             const tr_rng_key *key, tr_tensor *drel_bias, const tr_tensor *rel_bias, int max_distance,
                             int bidirectional, int window, int query_rows)
{
    tr_op_call c = { .t = { dq, dk, dv, dout, q, k, v, out, lse, mask, drel_bias, rel_bias },
                     .f = { scale, dropout_p },
                     .i = { max_distance, bidirectional, window, query_rows },
                     .p = key };
    return tr_op_run(ctx, &tr_opd_attention_backward, &c);
}
