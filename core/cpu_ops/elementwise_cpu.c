/* elementwise_cpu.c — the CPU slots (checks and wrappers: core/ops/elementwise.c): tensor-level add, mul (+ backward),
 * scale, axpy, fill over the kernels in kernels/cpu/elementwise.c. b broadcasts when it is a vector of a's last
 * dimension; every tensor may be f32, bf16 or f16 (computed in f32, block by block, so
 * half tensors need only a few MiB of workspace). */
#include "ops_elem.h"
#include "cpu_slot.h"
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

/* out = alpha * x (mode 0), out += alpha * x (mode 1) or out = alpha (mode 2, x unused),
 * in blocks of TR_STAGE_BLOCK elements. */
static int blockwise(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *x, float alpha, int mode)
{
    int rc = TR_OK;
    int64_t n = out->numel;
    for (int64_t s = 0; s < n && rc == TR_OK; s += TR_STAGE_BLOCK) {
        int64_t len = n - s < TR_STAGE_BLOCK ? n - s : TR_STAGE_BLOCK;
        tr_stage v[2] = {{0}}; /* x, out */
        if (!(rc = mode == 2 ? TR_OK : tr_stage_in(ctx, &v[0], x, s, len)) &&
            !(rc = tr_stage_out(ctx, &v[1], out, s, len, mode == 1))) {
            if (mode == 0)
                tr_k_scale_fwd_f32(v[1].p, v[0].p, alpha, len);
            else if (mode == 1)
                tr_k_axpy_fwd_f32(v[1].p, v[0].p, alpha, len);
            else
                tr_k_fill_fwd_f32(v[1].p, alpha, len);
            tr_stage_store(&v[1], out, s);
        }
        release_all(ctx, v, 2);
    }
    return rc;
}

static int binary_run(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b,
                      int is_mul)
{
    int rc = TR_OK;
    int64_t N, C;
    tr_op_rows(a, &N, &C);
    int64_t b_rows = b->numel == a->numel ? N : 1; /* the check allowed a's shape or one row */
    if (b_rows == N && !(out->dtype == TR_F32 && a->dtype == TR_F32 && b->dtype == TR_F32)) {
        /* half operands of one shape: span by span on each thread, in L1 */
        tr_stage_spans(out, a, b, is_mul ? mul_span : add_span, NULL);
        return TR_OK;
    }
    {
        /* blocks of rows; a broadcast b is converted once */
        int64_t rows = tr_stage_block_rows(C);
        tr_stage vbc = {0};
        if (b_rows == 1 && (rc = tr_stage_in_all(ctx, &vbc, b))) return rc;
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
            int64_t nr = N - r0 < rows ? N - r0 : rows, s = r0 * C, len = nr * C;
            tr_stage v[3] = {{0}}; /* a, b, out */
            if (!(rc = tr_stage_in(ctx, &v[0], a, s, len)) &&
                !(rc = b_rows == 1 ? TR_OK : tr_stage_in(ctx, &v[1], b, s, len)) &&
                !(rc = tr_stage_out(ctx, &v[2], out, s, len, 0))) {
                const float *bp = b_rows == 1 ? vbc.p : v[1].p;
                if (is_mul)
                    tr_k_mul_fwd_f32(v[2].p, v[0].p, bp, nr, C, b_rows == 1 ? 1 : nr);
                else
                    tr_k_add_fwd_f32(v[2].p, v[0].p, bp, nr, C, b_rows == 1 ? 1 : nr);
                tr_stage_store(&v[2], out, s);
            }
            release_all(ctx, v, 3);
        }
        tr_stage_release(ctx, &vbc);
        return rc;
    }
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

static int scaled_run(tr_ctx *ctx, const char *op, const tr_tensor *out, const tr_tensor *x, float alpha,
                      int accumulate)
{
    return blockwise(ctx, op, out, x, alpha, accumulate);
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(add, binary_run, "add", c->add.out, c->add.a, c->add.b, 0)
TR_CPU_SLOT_BY(mul, binary_run, "mul", c->mul.out, c->mul.a, c->mul.b, 1)
TR_CPU_SLOT_BY(mul_backward, mul_backward_run, c->mul_backward.da, c->mul_backward.db, c->mul_backward.dout,
               c->mul_backward.a, c->mul_backward.b)
TR_CPU_SLOT_BY(scale, scaled_run, "scale", c->scale.out, c->scale.x, c->f[0], 0)
TR_CPU_SLOT_BY(axpy, scaled_run, "axpy", c->axpy.y, c->axpy.x, c->f[0], 1)
TR_CPU_SLOT_BY(fill, blockwise, "fill", c->fill.out, NULL, c->f[0], 2)
