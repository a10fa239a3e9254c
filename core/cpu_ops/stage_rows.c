/* stage_rows.c — the CPU slots' row-block staging loop (see stage_rows.h). */
#include "stage_rows.h"

#include "op_stage.h"

int64_t tr_stage_rows_step(const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N, int64_t C)
{
    for (int i = 0; i < d->nargs; i++)
        if (layout[i] == TR_ROWS_BLOCK && c->t[i] && c->t[i]->dtype != TR_F32) return tr_stage_block_rows(C);
    return N > 0 ? N : 1;
}

int tr_stage_rows(tr_ctx *ctx, const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N,
                  int64_t C, tr_rows_fn fn, void *work)
{
    return tr_stage_rows_by(ctx, d, c, layout, N, C, tr_stage_rows_step(d, c, layout, N, C), fn, work);
}

static int is_whole(int layout)
{
    return layout == TR_ROWS_WHOLE || layout == TR_ROWS_FRESH;
}

int tr_stage_rows_by(tr_ctx *ctx, const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N,
                     int64_t C, int64_t step, tr_rows_fn fn, void *work)
{
    float *p[TR_OP_MAX_TENSORS] = {0};
    void *whole[TR_OP_MAX_TENSORS] = {0};
    int64_t width[TR_OP_MAX_TENSORS] = {0}; /* elements per row of each argument */
    int rc = TR_OK;
    for (int i = 0; i < d->nargs && rc == TR_OK; i++) {
        const tr_tensor *t = c->t[i];
        if (!t) continue;
        width[i] = N > 0 ? t->numel / N : 0;
        if (is_whole(layout[i]))
            rc = tr_stage_buf(ctx, t, 0, t->numel, layout[i] == TR_ROWS_WHOLE && d->args[i].role != TR_ARG_OUT, &p[i],
                              &whole[i]);
        else if (layout[i] == TR_ROWS_DIRECT)
            p[i] = t->data;
    }
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
        const int64_t nr = N - r0 < step ? N - r0 : step;
        void *block[TR_OP_MAX_TENSORS] = {0};
        for (int i = 0; i < d->nargs && rc == TR_OK; i++) {
            const tr_tensor *t = c->t[i];
            const int64_t off = r0 * width[i], n = nr * width[i];
            if (!t) continue;
            if (layout[i] == TR_ROWS_ONE)
                p[i] = (float *)(void *)((char *)t->data + (size_t)off * tr_dtype_size(t->dtype));
            else if (layout[i] != TR_ROWS_BLOCK)
                continue;
            else if (d->args[i].role == TR_ARG_IN)
                rc = tr_stage_buf(ctx, t, off, n, 1, &p[i], &block[i]);
            else
                rc = tr_stage_buf(ctx, t, off, n, d->args[i].role == TR_ARG_ACC, &p[i], &block[i]);
        }
        if (rc == TR_OK) rc = fn(c, p, r0, nr, C, work);
        for (int i = 0; i < d->nargs && rc == TR_OK; i++)
            if (layout[i] == TR_ROWS_BLOCK && c->t[i] && d->args[i].role != TR_ARG_IN)
                tr_stage_put(c->t[i], r0 * width[i], p[i], nr * width[i]);
        for (int i = 0; i < d->nargs; i++) tr_stage_scratch_free(ctx, block[i]);
    }
    for (int i = 0; i < d->nargs; i++) {
        if (rc == TR_OK && is_whole(layout[i]) && c->t[i] && d->args[i].role != TR_ARG_IN)
            tr_stage_put(c->t[i], 0, p[i], c->t[i]->numel);
        tr_stage_scratch_free(ctx, whole[i]);
    }
    return rc;
}

void tr_stage_stack_blocks(const tr_op_call *c, int64_t N, int64_t rows, int64_t elems, tr_stack_block_fn fn,
                           const float *W, const float *Bi)
{
    const int64_t nblk = (N + rows - 1) / rows;
    if (elems <= 16384) {   /* no OpenMP region: even an if(0) one makes a libgomp team */
        for (int64_t k = 0; k < nblk; k++) fn(c, k * rows, N - k * rows < rows ? N - k * rows : rows, W, Bi);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nblk; k++) fn(c, k * rows, N - k * rows < rows ? N - k * rows : rows, W, Bi);
}
