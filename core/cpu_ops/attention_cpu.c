/* attention_cpu.c — the CPU slots (checks and wrappers: core/ops/attention.c): tensor-level scaled-dot-product
 * attention (kernels/cpu/attention.c).
 *
 * The kernel's per-thread scratch (threads x (3 x 64 x Tp + 2 x D x Tp + 5 x Tp + 64) floats,
 * Tp = T rounded up to 16: the block buffers and the head's packed k^T and v^T;
 * tr_k_attention_scratch_elems) comes from the allocator with tag workspace, so it is
 * visible in the memory ledger. bf16 tensors (the mixed-precision runs) go to the kernel's bf16
 * entry whole: each task converts its head's rows into the thread's f32 copies (7 x T x D more
 * floats a thread) and rounds its results back, the bits of the f32 kernel on the same values.
 * Otherwise the staging loop (stage_rows.h) sees a batch element as a row: f32 tensors run in
 * one kernel call over the whole batch; f16 tensors (and bf16 ones of attn_short.h's short
 * rows) are staged to f32 a block of batch elements at a time (attention is independent per
 * batch element), with the dropout stream offset by the block's first element so that element
 * (b, h, i, j) always draws element ((b*H + h)*T + i)*T + j of the key's stream. lse (f32)
 * and the mask (i32 or f32) are used in place. A relative-position bias table (tiny) is
 * staged whole (read in place when f32); its gradient (f32) is accumulated in place, through
 * per-(b, h) sums by relative position (B x H x (2T - 1) floats of workspace, the kernel's
 * rel->dist). A window (window > 0) reaches the kernel in the same struct, with or without a
 * table, and so do the query rows (query_rows > 0: only each sequence's first rows are
 * computed, cpu/attention.h). */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/attention.h"
#include <math.h>

#define FWD(name) TR_ARGI(attention, name)
#define BWD(name) TR_ARGI(attention_backward, name)

typedef struct attn_stream {
    tr_rng_key key;
    uint64_t base; /* stream index of the first element of this block of batch elements */
} attn_stream;

/* What the kernel calls of a block share: the call's sizes, scale, dropout, scratch and
 * relative-position bias. */
typedef struct attn_run {
    int64_t T, H, D;
    float scale, dropout_p;
    attn_stream stream;
    float *scratch;
    int nthreads;
    tr_attn_relpos rel;
    const tr_tensor *rel_table;  /* NULL: no bias */
} attn_run;

static void attn_keep(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset)
{
    const attn_stream *s = key;
    tr_dropout_mask_words(mask, n, p, s->key, s->base + offset);
}

/* The run of a call: its sizes, scale, dropout and bias from the call's arguments (no scratch yet). */
static attn_run attn_run_of(const tr_op_call *c, const tr_tensor *q, const tr_tensor *rel_table)
{
    attn_run r = {q->shape[1], q->shape[2], q->shape[3], 0, c->f[1], {{0, 0, 0, 0}, 0}, NULL, tr_k_attention_threads(),
                  {NULL, NULL, NULL, 0, 0, 0, 0, 0}, rel_table};
    r.scale = c->f[0] > 0 ? c->f[0] : 1.0f / sqrtf((float)r.D);
    if (c->p) r.stream.key = *(const tr_rng_key *)c->p;
    if (rel_table) r.rel = (tr_attn_relpos){NULL, NULL, NULL, rel_table->shape[0], c->i[0], (int)c->i[1], 0, 0};
    r.rel.window = c->i[2];       /* 0: every key */
    r.rel.query_rows = c->i[3];   /* 0: every query */
    return r;
}

/* fn over the call's batch elements (rows of T*H*D of q [B, T, H, D]) with the run's sizes
 * and the kernel's scratch. */
static int attn_rows(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, const tr_tensor *q, const unsigned char *layout,
                     const tr_tensor *rel_table, const tr_tensor *drel_table, tr_rows_fn fn)
{
    attn_run r = attn_run_of(c, q, rel_table);
    int rc =
        tr_stage_scratch(ctx, tr_k_attention_scratch_elems(r.T, r.D, r.nthreads) * sizeof(float), (void **)&r.scratch);
    if (rc == TR_OK && drel_table)
        rc = tr_stage_scratch(ctx, (size_t)(q->shape[0] * r.H * (2 * r.T - 1)) * sizeof(float), &r.rel.dist);
    if (rc == TR_OK) rc = tr_stage_rows(ctx, d, c, layout, q->shape[0], r.T * r.H * r.D, fn, &r);
    if (r.rel.dist) tr_stage_scratch_free(ctx, r.rel.dist);
    tr_stage_scratch_free(ctx, r.scratch);
    return rc;
}

/* The run's bias, window and query rows with the block's table and gradient pointers (staged by
 * the loop), or NULL when there is none of them. */
static const tr_attn_relpos *attn_rel(attn_run *r, float *table, float *dtable)
{
    if (!r->rel_table && r->rel.window <= 0 && r->rel.query_rows <= 0) return NULL;
    r->rel.table = table;
    r->rel.dtable = dtable;
    return &r->rel;
}

static tr_attn_dropout *attn_block(attn_run *r, tr_attn_dropout *drop, int64_t b0)
{
    r->stream.base = (uint64_t)(b0 * r->H * r->T * r->T);
    *drop = (tr_attn_dropout){r->dropout_p, attn_keep, &r->stream};
    return r->dropout_p > 0 ? drop : NULL;
}

static int mask_dtype(const tr_tensor *mask)
{
    return mask ? mask->dtype : TR_I32;
}

/* ------------------------------------------------------------ bf16 tensors */

/* 1 when every tensor in ts is bf16 and the kernel's bf16 entry takes the call. */
static int attn_bf16(const tr_tensor *const *ts, int n, const tr_op_call *c, const tr_tensor *q,
                     const tr_tensor *rel_table)
{
    for (int i = 0; i < n; i++)
        if (ts[i]->dtype != TR_BF16) return 0;
    return tr_k_attention_bf16_usable(q->shape[1], q->shape[3], c->f[1] > 0, rel_table != NULL, c->i[2]);
}

/* The whole call on the kernel's bf16 entry (forward, or backward when dq is given): its scratch
 * (the head copies of every thread, a few hundred KiB) instead of f32 copies of whole blocks of
 * batch elements; the bias table staged whole, its gradient accumulated in place. */
static int attn_bf16_call(tr_ctx *ctx, tr_op_call *c, const tr_tensor *q, const tr_tensor *rel_table,
                          const tr_tensor *drel_table, int backward)
{
    attn_run r = attn_run_of(c, q, rel_table);
    const int64_t B = q->shape[0];
    float *table = NULL;
    void *table_owned = NULL;
    int rc = tr_stage_scratch(ctx, tr_k_attention_bf16_scratch_elems(r.T, r.D, r.nthreads) * sizeof(float),
                              (void **)&r.scratch);
    if (rc == TR_OK && drel_table)
        rc = tr_stage_scratch(ctx, (size_t)(B * r.H * (2 * r.T - 1)) * sizeof(float), &r.rel.dist);
    if (rc == TR_OK && rel_table) rc = tr_stage_buf(ctx, rel_table, 0, rel_table->numel, 1, &table, &table_owned);
    if (rc == TR_OK) {
        tr_attn_dropout drop;
        const tr_attn_dropout *dp = attn_block(&r, &drop, 0);
        const tr_attn_relpos *rel = attn_rel(&r, table, drel_table ? drel_table->data : NULL);
        if (backward) {
            const tr_tensor *m = c->attention_backward.mask;
            tr_k_attention_bwd_bf16(c->attention_backward.dq->data, c->attention_backward.dk->data,
                                    c->attention_backward.dv->data, c->attention_backward.dout->data, q->data,
                                    c->attention_backward.k->data, c->attention_backward.v->data,
                                    c->attention_backward.lse->data, m ? m->data : NULL, mask_dtype(m), dp, rel,
                                    r.scale, B, r.T, r.H, r.D, r.scratch, r.nthreads);
        } else {
            const tr_tensor *m = c->attention.mask;
            tr_k_attention_fwd_bf16(c->attention.out->data, c->attention.lse->data, q->data, c->attention.k->data,
                                    c->attention.v->data, m ? m->data : NULL, mask_dtype(m), dp, rel, r.scale, B, r.T,
                                    r.H, r.D, r.scratch, r.nthreads);
        }
    }
    tr_stage_scratch_free(ctx, table_owned);
    if (r.rel.dist) tr_stage_scratch_free(ctx, r.rel.dist);
    tr_stage_scratch_free(ctx, r.scratch);
    return rc;
}

/* ------------------------------------------------------------ forward */

static const unsigned char fwd_layout[TR_OP_MAX_TENSORS] = {
    [FWD(out)] = TR_ROWS_BLOCK, [FWD(lse)] = TR_ROWS_ONE, [FWD(q)] = TR_ROWS_BLOCK,
    [FWD(k)] = TR_ROWS_BLOCK,   [FWD(v)] = TR_ROWS_BLOCK, [FWD(mask)] = TR_ROWS_ONE,
    [FWD(rel_bias)] = TR_ROWS_WHOLE,
};

static int fwd_rows(const tr_op_call *c, float *const *p, int64_t b0, int64_t nb, int64_t C, void *work)
{
    attn_run *r = work;
    tr_attn_dropout drop;
    tr_k_attention_fwd_rel_f32(p[FWD(out)], p[FWD(lse)], p[FWD(q)], p[FWD(k)], p[FWD(v)], p[FWD(mask)],
                               mask_dtype(c->attention.mask), attn_block(r, &drop, b0), attn_rel(r, p[FWD(rel_bias)], NULL), r->scale, nb,
                               r->T, r->H, r->D, r->scratch, r->nthreads);
    return TR_OK;
}

int tr_cpu_attention(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *half[] = {c->attention.out, c->attention.q, c->attention.k, c->attention.v};
    if (attn_bf16(half, 4, c, c->attention.q, c->attention.rel_bias))
        return attn_bf16_call(ctx, c, c->attention.q, c->attention.rel_bias, NULL, 0);
    return attn_rows(ctx, &tr_opd_attention, c, c->attention.q, fwd_layout, c->attention.rel_bias, NULL, fwd_rows);
}

/* ------------------------------------------------------------ backward */

/* The forward's output (out, nullable) has no layout, so it is neither staged nor read: the
 * kernel takes the row terms delta_i = dout_i . out_i as rowsum(P dP) of the block's
 * probabilities and their gradient, which it forms anyway (the same sum, with or without out). */
static const unsigned char bwd_layout[TR_OP_MAX_TENSORS] = {
    [BWD(dq)] = TR_ROWS_BLOCK,   [BWD(dk)] = TR_ROWS_BLOCK, [BWD(dv)] = TR_ROWS_BLOCK,
    [BWD(dout)] = TR_ROWS_BLOCK, [BWD(q)] = TR_ROWS_BLOCK,  [BWD(k)] = TR_ROWS_BLOCK,
    [BWD(v)] = TR_ROWS_BLOCK,    [BWD(lse)] = TR_ROWS_ONE,  [BWD(mask)] = TR_ROWS_ONE,
    [BWD(drel_bias)] = TR_ROWS_DIRECT, [BWD(rel_bias)] = TR_ROWS_WHOLE,
};

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t b0, int64_t nb, int64_t C, void *work)
{
    attn_run *r = work;
    tr_attn_dropout drop;
    tr_k_attention_bwd_rel_f32(p[BWD(dq)], p[BWD(dk)], p[BWD(dv)], p[BWD(dout)], p[BWD(q)], p[BWD(k)], p[BWD(v)],
                               p[BWD(lse)], p[BWD(mask)], mask_dtype(c->attention_backward.mask),
                               attn_block(r, &drop, b0), attn_rel(r, p[BWD(rel_bias)], p[BWD(drel_bias)]), r->scale,
                               nb, r->T, r->H, r->D, r->scratch, r->nthreads);
    return TR_OK;
}

int tr_cpu_attention_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *half[] = {c->attention_backward.dq, c->attention_backward.dk, c->attention_backward.dv,
                               c->attention_backward.dout, c->attention_backward.q, c->attention_backward.k,
                               c->attention_backward.v};
    if (attn_bf16(half, 7, c, c->attention_backward.q, c->attention_backward.rel_bias))
        return attn_bf16_call(ctx, c, c->attention_backward.q, c->attention_backward.rel_bias,
                              c->attention_backward.drel_bias, 1);
    return attn_rows(ctx, &tr_opd_attention_backward, c, c->attention_backward.q, bwd_layout,
                     c->attention_backward.rel_bias, c->attention_backward.drel_bias, bwd_rows);
}
