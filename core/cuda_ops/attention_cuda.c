/* attention_cuda.c — the CUDA slots of attention and attention_backward (CPU slots:
 * core/cpu_ops/attention_cpu.c) over the flash-style kernels of kernels/cuda/attention.cu: one warp
 * per row, keys streamed in tiles with an online softmax, the row log-sum-exp saved, and
 * nothing of size T x T ever stored, forward or backward. The padding mask (i32 or f32)
 * goes to the kernels as it is; dropout on the probabilities draws the CPU's stream
 * elements from the same key, so the masks agree bit for bit.
 *
 * The kernels take one dtype for q, k, v and out (dq, dk, dv, dout): when the tensors mix
 * dtypes, all of them are staged to f32 workspace. The backward's row terms delta_i =
 * dout_i . out_i need the forward's output: the caller's out when it kept it (read as it
 * is, no forward run), else recomputed into workspace by the forward kernel with the same
 * key and mask (the same bits as the forward's). Head sizes up to 128. A relative-position
 * bias table is read in f32 (a half one staged), its gradient (f32) accumulated in place; their
 * scratch (each head's biases by relative position, the buckets, the per-(b, h) sums) is
 * workspace. A window (local attention) and the query rows go to the kernels' _win launchers
 * with the bias. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "ops_nn.h"
#include "rng.h"

#include <math.h>

enum { ATTN_MAX_D = 128 };

static float scale_of(float scale, int64_t D)
{
    return scale > 0 ? scale : 1.0f / sqrtf((float)D);
}

static int want_head_dim(tr_cslot *s, int64_t D)
{
    if (D <= ATTN_MAX_D) return TR_OK;
    return tr_fail(s->err, TR_EUSER,
                   "%s on cuda:%d: head dim %lld is above the %d the CUDA kernels hold in registers; run this "
                   "attention on the CPU or use a model with heads of at most %d",
                   s->op, s->device, (long long)D, ATTN_MAX_D, ATTN_MAX_D);
}

/* The dtype every tensor of ts is run in: theirs when they agree, else f32. */
static int common_dtype(const tr_tensor *const *ts, int n)
{
    for (int i = 1; i < n; i++)
        if (ts[i]->dtype != ts[0]->dtype) return TR_F32;
    return ts[0]->dtype;
}

static tr_rng_key key_of(const tr_op_call *c)
{
    return c->p ? *(const tr_rng_key *)c->p : (tr_rng_key){0, 0, 0, 0};
}

/* The call's relative-position bias for the launchers (r->table NULL: none), its scratch
 * from workspace. */
static int rel_of(tr_cslot *s, const tr_op_call *c, const tr_tensor *table, const tr_tensor *dtable, int64_t B,
                  int64_t T, int64_t H, tr_k_attn_rel *r)
{
    *r = (tr_k_attn_rel){NULL, NULL, NULL, 0, 0, 0};
    if (!table) return TR_OK;
    void *scratch;
    const void *tab;
    int rc;
    if ((rc = tr_cslot_ws(s, tr_k_attention_rel_scratch_cuda(B, T, H), TR_F32, &scratch)) ||
        (rc = tr_cslot_in(s, table, TR_F32, &tab)))
        return rc;
    *r = (tr_k_attn_rel){tab, dtable ? dtable->data : NULL, scratch, table->shape[0], c->i[0], (int)c->i[1]};
    return TR_OK;
}

/* The forward's q, k, v (in) and out (out) in one dtype (*dt): theirs, or f32 workspace. */
typedef struct fwd_operands {
    int dt;
    const void *Q, *K, *V;
    void *O;
} fwd_operands;

static int stage_forward(tr_cslot *s, const tr_tensor *q, const tr_tensor *k, const tr_tensor *v,
                         const tr_tensor *out, fwd_operands *f)
{
    const tr_tensor *all[] = {q, k, v, out};
    f->dt = common_dtype(all, 4);
    int rc;
    if ((rc = tr_cslot_in(s, q, f->dt, &f->Q)) || (rc = tr_cslot_in(s, k, f->dt, &f->K)) ||
        (rc = tr_cslot_in(s, v, f->dt, &f->V)) || (rc = tr_cslot_out(s, out, f->dt, 0, &f->O)))
        return rc;
    return TR_OK;
}

TR_CSLOT_DEFINE(attention)
static int attention_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->attention.out, *lse = c->attention.lse, *q = c->attention.q, *k = c->attention.k,
                    *v = c->attention.v, *mask = c->attention.mask;
    const int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    int rc;
    fwd_operands f;
    tr_k_attn_rel rel;
    if ((rc = want_head_dim(s, D)) || (rc = stage_forward(s, q, k, v, out, &f)) ||
        (rc = rel_of(s, c, c->attention.rel_bias, NULL, B, T, H, &rel)))
        return rc;
    const tr_rng_key key = key_of(c);
    if ((rc = tr_k_attention_fwd_win_cuda(f.O, lse->data, f.Q, f.K, f.V, f.dt, mask ? mask->data : NULL,
                                          mask ? mask->dtype : TR_I32, c->f[1], key.seed, key.step, key.layer, key.op,
                                          &rel, scale_of(c->f[0], D), B, T, H, D, c->i[2], c->i[3], s->stream,
                                          s->err)))
        return rc;
    return tr_cslot_store(s, out, f.dt, f.O);
}

/* dq, dk, dv (=) */
TR_CSLOT_DEFINE(attention_backward)
static int attention_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *dq = c->attention_backward.dq, *dk = c->attention_backward.dk, *dv = c->attention_backward.dv,
                    *dout = c->attention_backward.dout, *q = c->attention_backward.q, *k = c->attention_backward.k,
                    *v = c->attention_backward.v, *out = c->attention_backward.out, *lse = c->attention_backward.lse,
                    *mask = c->attention_backward.mask;
    const int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    int rc;
    if ((rc = want_head_dim(s, D))) return rc;
    /* out is left out of the run's dtype, so the kernels are those the recompute would run */
    const tr_tensor *all[] = {dq, dk, dv, dout, q, k, v};
    const int dt = common_dtype(all, 7);
    const void *Q, *K, *V, *DO, *O;
    void *DQ, *DK, *DV, *scratch;
    if ((rc = tr_cslot_in(s, q, dt, &Q)) || (rc = tr_cslot_in(s, k, dt, &K)) || (rc = tr_cslot_in(s, v, dt, &V)) ||
        (rc = tr_cslot_in(s, dout, dt, &DO)) || (rc = tr_cslot_out(s, dq, dt, 0, &DQ)) ||
        (rc = tr_cslot_out(s, dk, dt, 0, &DK)) || (rc = tr_cslot_out(s, dv, dt, 0, &DV)) ||
        (rc = tr_cslot_ws(s, tr_k_attention_bwd_scratch_cuda(B, T, H), TR_F32, &scratch)))
        return rc;
    tr_k_attn_rel rel;
    if ((rc = rel_of(s, c, c->attention_backward.rel_bias, c->attention_backward.drel_bias, B, T, H, &rel)))
        return rc;
    const tr_rng_key key = key_of(c);
    const void *m = mask ? mask->data : NULL;
    const int mdt = mask ? mask->dtype : TR_I32;
    const float scale = scale_of(c->f[0], D), p = c->f[1];
    if (out) {
        if ((rc = tr_cslot_in(s, out, dt, &O))) return rc;
    } else {
        /* the forward's output, recomputed (its lse lands in lse2; the backward reads the op's) */
        void *O2, *lse2;
        if ((rc = tr_cslot_ws(s, q->numel, dt, &O2)) || (rc = tr_cslot_ws(s, lse->numel, TR_F32, &lse2)) ||
            (rc = tr_k_attention_fwd_win_cuda(O2, lse2, Q, K, V, dt, m, mdt, p, key.seed, key.step, key.layer,
                                              key.op, &rel, scale, B, T, H, D, c->i[2], c->i[3], s->stream, s->err)))
            return rc;
        O = O2;
    }
    if ((rc = tr_k_attention_bwd_win_cuda(DQ, DK, DV, DO, O, Q, K, V, dt, lse->data, m, mdt, p, key.seed, key.step,
                                          key.layer, key.op, &rel, scale, B, T, H, D, c->i[2], c->i[3], scratch,
                                          s->stream, s->err)))
        return rc;
    if ((rc = tr_cslot_store(s, dq, dt, DQ)) || (rc = tr_cslot_store(s, dk, dt, DK))) return rc;
    return tr_cslot_store(s, dv, dt, DV);
}

/* attention_packed: sequence b is the padded kernel over one batch row of lengths[b] rows,
 * no mask (its keys are its rows), launched on the sequence's rows in place; its lse lands
 * at H*off_b as that kernel's [1, H, n_b] block. The CPU slot: core/cpu_ops/attention_packed_cpu.c. */
TR_CSLOT_DEFINE(attention_packed)
static int attention_packed_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->attention_packed.out, *lse = c->attention_packed.lse, *q = c->attention_packed.q,
                    *k = c->attention_packed.k, *v = c->attention_packed.v;
    const tr_attn_lengths *L = c->p;
    const int64_t H = q->shape[1], D = q->shape[2];
    int rc;
    fwd_operands f;
    if ((rc = want_head_dim(s, D)) || (rc = stage_forward(s, q, k, v, out, &f))) return rc;
    const size_t row_bytes = (size_t)(H * D) * tr_dtype_size(f.dt);
    const float scale = scale_of(c->f[0], D);
    int64_t off = 0;
    for (int64_t b = 0; b < L->B && rc == TR_OK; b++) {
        int64_t n = L->len[b];
        if (n > 0)
            rc = tr_k_attention_fwd_cuda((char *)f.O + off * row_bytes, (float *)lse->data + H * off,
                                         (const char *)f.Q + off * row_bytes, (const char *)f.K + off * row_bytes,
                                         (const char *)f.V + off * row_bytes, f.dt, NULL, TR_I32, 0, 0, 0, 0, 0, NULL,
                                         scale, 1, n, H, D, s->stream, s->err);
        off += n;
    }
    if (rc != TR_OK) return rc;
    return tr_cslot_store(s, out, f.dt, f.O);
}

#endif
