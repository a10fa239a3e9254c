/* embedding.c — tensor-level embedding lookup and its deterministic scatter-add
 * backward over kernels/cpu/embedding.c. ids (i32 or i64) are validated against the
 * vocabulary before any kernel runs, so a bad id never reads or writes out of bounds.
 * Here: the shape checks of its op-table entries (arguments in op_list.h) and the public
 * wrappers; slots: core/cpu_ops/embedding_cpu.c, core/cuda_ops/embedding_cuda.c. */
#include "ops_embedding.h"

#include "cpu/embedding.h"
#include "op_stage.h"
#include "op_table.h"

#include <string.h>

/* ------------------------------------------------------------ ids */

/* Checks table [V, C] and out/dout (N*C elements, last dim C). */
static int shapes(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *rows, const tr_tensor *ids,
                  const tr_tensor *table)
{
    char b[160];
    if (table->ndim != 2)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: the table has shape %s but must be [vocab, dim]", op,
                       tr_op_describe(b, sizeof b, table));
    int64_t C = table->shape[1];
    if (rows->numel != ids->numel * C || (rows->ndim > 0 && rows->shape[rows->ndim - 1] != C))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: %s has shape %s but must have the ids' %lld elements times the table's dim %lld, "
                       "with last dimension %lld",
                       op, name, tr_op_describe(b, sizeof b, rows), (long long)ids->numel, (long long)C,
                       (long long)C);
    return TR_OK;
}

/* ------------------------------------------------------------ ops */

static int embedding_checks(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *ids, const tr_tensor *table)
{
    const char *op = "embedding";
    int rc;
    if ((rc = shapes(ctx, op, "out", out, ids, table)))
        return rc;
    return TR_OK;
}

static int embedding_backward_checks(tr_ctx *ctx, const tr_tensor *dtable, const tr_tensor *dout, const tr_tensor *ids,
                                     int64_t padding_idx)
{
    const char *op = "embedding_backward";
    int rc;
    if ((rc = shapes(ctx, op, "dout", dout, ids, dtable)))
        return rc;
    return TR_OK;
}

/* ------------------------------------------------------------ the op table */

TR_OP_CHECK_BY(embedding, embedding_checks, c->embedding.out, c->embedding.ids, c->embedding.table)
TR_OP_CHECK_BY(embedding_backward, embedding_backward_checks, c->embedding_backward.dtable, c->embedding_backward.dout,
               c->embedding_backward.ids, c->i[0])

/* out: ids' shape and the table's row width, in the table's dtype. */
int tr_infer_embedding(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)
{
    const tr_tensor *ids = c->embedding.ids, *table = c->embedding.table;
    int64_t dims[8];
    int n = ids->ndim < 7 ? ids->ndim : 7;
    for (int i = 0; i < n; i++) dims[i] = ids->shape[i];
    dims[n] = table->ndim == 2 ? table->shape[1] : 0;
    tr_op_infer_dims(shape, ndim, dtype, 0, n + 1, dims, table->dtype | TR_INFER_CHOOSE);
    return TR_OK;
}

int tr_op_embedding(tr_ctx *ctx, tr_tensor *out, const tr_tensor *ids, const tr_tensor *table)
{
    tr_op_call c = { .t = { out, ids, table } };
    return tr_op_run(ctx, &tr_opd_embedding, &c);
}

int tr_op_embedding_backward(tr_ctx *ctx, tr_tensor *dtable, const tr_tensor *dout, const tr_tensor *ids,
                             int64_t padding_idx)
{
    tr_op_call c = { .t = { dtable, dout, ids }, .i = { padding_idx } };
    return tr_op_run(ctx, &tr_opd_embedding_backward, &c);
}
