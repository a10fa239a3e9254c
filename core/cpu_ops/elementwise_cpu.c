/* elementwise_cpu.c — the CPU slots (checks and wrappers: core/ops/elementwise.c): tensor-level add, mul (+ backward),
 * scale, axpy, fill over the kernels in kernels/cpu/elementwise.c. b broadcasts when it is a vector of a's last
 * dimension; every tensor may be f32, bf16 or f16 (computed in f32, block by block, so
 * half tensors need only a few MiB of workspace). */
#include "ops_elem.h"
#include "cpu_slot.h"
#include "stage_rows.h"
#include "cpu/elementwise.h"

/* ------------------------------------------------------------ add, mul */

static void release_all(tr_ctx *ctx, tr_stage *v, int n)
{
    for (int i = 0; i < n; i++) tr_stage_release(ctx, &v[i]);
}

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

static int mul_backward_run(tr_ctx *ctx, const tr_tensor *da, const tr_tensor *db, const tr_tensor *dout,
                            const tr_tensor *a, const tr_tensor *b)
{
    int rc = TR_OK;
    int64_t N, C;
    tr_op_rows(a, &N, &C);
    int64_t b_rows = b->numel == a->numel ? N : 1; /* the check allowed a's shape or one row */
    {
        /* blocks of rows; with a broadcast b, db is the sum of the blocks' column sums, added
         * in block order (deterministic) into an f32 accumulator */
        int64_t rows = tr_stage_block_rows(C), bc = b_rows == 1;
        tr_stage vbc = {0}, vacc = {0};
        float *tmp = NULL;
        if (bc && ((rc = tr_stage_in_all(ctx, &vbc, b)) ||
                   (db && ((rc = tr_stage_out_all(ctx, &vacc, db, 0)) ||
                           (rc = tr_stage_scratch(ctx, (size_t)C * sizeof(float), (void **)&tmp)))))) {
            tr_stage_release(ctx, &vbc), tr_stage_release(ctx, &vacc);
            return rc;
        }
        if (bc && db) tr_k_fill_fwd_f32(vacc.p, 0, C);
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
            int64_t nr = N - r0 < rows ? N - r0 : rows, s = r0 * C, len = nr * C;
            tr_stage v[5] = {{0}}; /* dout, a, b, da, db */
            if (!(rc = tr_stage_in(ctx, &v[0], dout, s, len)) &&
                !(rc = db ? tr_stage_in(ctx, &v[1], a, s, len) : TR_OK) &&
                !(rc = bc ? TR_OK : tr_stage_in(ctx, &v[2], b, s, len)) &&
                !(rc = tr_stage_out(ctx, &v[3], da, s, len, 0)) &&
                !(rc = bc ? TR_OK : tr_stage_out(ctx, &v[4], db, s, len, 0))) {
                const float *bp = bc ? vbc.p : v[2].p;
                float *dbp = db ? (bc ? tmp : v[4].p) : NULL;
                tr_k_mul_bwd_f32(v[3].p, dbp, v[0].p, v[1].p, bp, nr, C, bc ? 1 : nr);
                tr_stage_store(&v[3], da, s);
                if (db && bc)
                    tr_k_axpy_fwd_f32(vacc.p, tmp, 1.0f, C);
                else if (db)
                    tr_stage_store(&v[4], db, s);
            }
            release_all(ctx, v, 5);
        }
        if (rc == TR_OK && bc && db) tr_stage_store_all(&vacc, db);
        tr_stage_scratch_free(ctx, tmp);
        tr_stage_release(ctx, &vacc);
        tr_stage_release(ctx, &vbc);
        return rc;
    }
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(add, binary_run, c, 0)
TR_CPU_SLOT_BY(mul, binary_run, c, 1)
TR_CPU_SLOT_BY(mul_backward, mul_backward_run, c->mul_backward.da, c->mul_backward.db, c->mul_backward.dout,
               c->mul_backward.a, c->mul_backward.b)
TR_CPU_SLOT_BY(scale, scaled_run, &tr_opd_scale, c, scale_rows)
TR_CPU_SLOT_BY(axpy, scaled_run, &tr_opd_axpy, c, axpy_rows)
TR_CPU_SLOT_BY(fill, scaled_run, &tr_opd_fill, c, fill_rows)
