/* elementwise_cpu.c — the CPU slots (checks and wrappers: core/ops/elementwise.c): tensor-level add, mul (+ backward),
 * scale, axpy, fill over the kernels in kernels/cpu/elementwise.c. b broadcasts when it is a vector of a's last
 * dimension; every tensor may be f32, bf16 or f16 (computed in f32, block by block, so
 * half tensors need only a few MiB of workspace). */
#include "ops_elementwise.h"
#include "cpu_slot.h"
#include "cpu/elementwise.h"
#include <string.h>

/* ------------------------------------------------------------ add, mul */

/* One span of add and mul for tr_stage_spans (n <= TR_STAGE_SPAN: the kernels run it on
 * the calling thread). */
static void add_span(const void *arg, float *y, const float *a, const float *b, int64_t n)
{
    (void)arg;
    tr_k_add_fwd_f32(y, a, b, 1, n, 1);
}

static void mul_span(const void *arg, float *y, const float *a, const float *b, int64_t n)
{
    (void)arg;
    tr_k_mul_fwd_f32(y, a, b, 1, n, 1);
}

/* scale, axpy, fill: rows of one element for the staging loop; out (or y) then x. */
static const unsigned char scaled_layout[TR_OP_MAX_TENSORS] = {TR_ROWS_BLOCK, TR_ROWS_BLOCK};

static int scale_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t n, int64_t one, void *work)
{
    tr_k_scale_fwd_f32(p[0], p[1], c->f[0], n);
    return TR_OK;
}

static int axpy_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t n, int64_t one, void *work)
{
    tr_k_axpy_fwd_f32(p[0], p[1], c->f[0], n);
    return TR_OK;
}

static int fill_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t n, int64_t one, void *work)
{
    tr_k_fill_fwd_f32(p[0], c->f[0], n);
    return TR_OK;
}

static int scaled_run(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, tr_rows_fn fn)
{
    return tr_stage_rows(ctx, d, c, scaled_layout, c->t[0]->numel, 1, fn, NULL);
}

/* add and mul over a block of rows for the staging loop; work: whether b broadcasts. */
static int add_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_add_fwd_f32(p[0], p[1], p[2], nr, C, *(const int *)work ? 1 : nr);
    return TR_OK;
}

static int mul_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    tr_k_mul_fwd_f32(p[0], p[1], p[2], nr, C, *(const int *)work ? 1 : nr);
    return TR_OK;
}

static int binary_run(tr_ctx *ctx, tr_op_call *c, int is_mul)
{
    const tr_tensor *out = c->add.out, *a = c->add.a, *b = c->add.b; /* mul: the same arguments */
    int64_t N, C;
    tr_op_rows(a, &N, &C);
    int64_t b_rows = b->numel == a->numel ? N : 1; /* the check allowed a's shape or one row */
    if (b_rows == N && !(out->dtype == TR_F32 && a->dtype == TR_F32 && b->dtype == TR_F32)) {
        /* half operands of one shape: span by span on each thread, in L1 */
        tr_stage_spans(out, a, b, is_mul ? mul_span : add_span, NULL);
        return TR_OK;
    }
    /* blocks of rows; a broadcast b is converted once */
    const unsigned char layout[TR_OP_MAX_TENSORS] = {TR_ROWS_BLOCK, TR_ROWS_BLOCK,
                                                     b_rows == 1 ? TR_ROWS_WHOLE : TR_ROWS_BLOCK};
    int broadcast = b_rows == 1;
    return tr_stage_rows(ctx, is_mul ? &tr_opd_mul : &tr_opd_add, c, layout, N, C, is_mul ? mul_rows : add_rows,
                         &broadcast);
}

#define MB(name) TR_ARGI(mul_backward, name)

/* With a broadcast b, db is the sum of the blocks' column sums (each block's in tmp), added
 * in block order (deterministic) into db's f32 view. */
typedef struct mul_bwd_work {
    float *tmp;
    int broadcast;
} mul_bwd_work;

static int mul_backward_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    const mul_bwd_work *w = work;
    float *db = p[MB(db)];
    if (w->broadcast && db && r0 == 0) tr_k_fill_fwd_f32(db, 0, C);
    tr_k_mul_bwd_f32(p[MB(da)], db && w->broadcast ? w->tmp : db, p[MB(dout)], p[MB(a)], p[MB(b)], nr, C,
                     w->broadcast ? 1 : nr);
    if (db && w->broadcast) tr_k_axpy_fwd_f32(db, w->tmp, 1.0f, C);
    return TR_OK;
}

int tr_cpu_mul_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *db = c->mul_backward.db, *a = c->mul_backward.a, *b = c->mul_backward.b;
    int64_t N, C;
    tr_op_rows(a, &N, &C);
    const int64_t b_rows = b->numel == a->numel ? N : 1; /* the check allowed a's shape or one row */
    mul_bwd_work w = {NULL, b_rows == 1};
    if (N == 0) { /* no rows: a broadcast db is their empty sum */
        if (w.broadcast && db) memset(db->data, 0, (size_t)db->numel * tr_dtype_size(db->dtype));
        return TR_OK;
    }
    const unsigned char layout[TR_OP_MAX_TENSORS] = {
        [MB(da)] = TR_ROWS_BLOCK,
        [MB(db)] = w.broadcast ? TR_ROWS_WHOLE : TR_ROWS_BLOCK,
        [MB(dout)] = TR_ROWS_BLOCK,
        [MB(a)] = db ? TR_ROWS_BLOCK : 0,
        [MB(b)] = w.broadcast ? TR_ROWS_WHOLE : TR_ROWS_BLOCK,
    };
    int rc = TR_OK;
    if (w.broadcast && db) rc = tr_stage_scratch(ctx, (size_t)C * sizeof(float), (void **)&w.tmp);
    if (rc == TR_OK)
        rc =
            tr_stage_rows_by(ctx, &tr_opd_mul_backward, c, layout, N, C, tr_stage_block_rows(C), mul_backward_rows, &w);
    tr_stage_scratch_free(ctx, w.tmp);
    return rc;
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(add, binary_run, c, 0)
TR_CPU_SLOT_BY(mul, binary_run, c, 1)
TR_CPU_SLOT_BY(scale, scaled_run, &tr_opd_scale, c, scale_rows)
TR_CPU_SLOT_BY(axpy, scaled_run, &tr_opd_axpy, c, axpy_rows)
TR_CPU_SLOT_BY(fill, scaled_run, &tr_opd_fill, c, fill_rows)
