/* embedding.c — tensor-level embedding lookup and its deterministic scatter-add
 * backward over kernels/cpu/embedding.c. ids (i32 or i64) are validated against the
 * vocabulary before any kernel runs, so a bad id never reads or writes out of bounds. */
#include "ops_elem.h"

#include "cpu/embedding.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"

#include <string.h>

/* ------------------------------------------------------------ ids */

/* *ids64 = the ids as int64 (the tensor's data, or a workspace copy in *ws), checked to
 * lie in [0, V). */
static int load_ids(tr_ctx *ctx, const char *op, const tr_tensor *ids, int64_t V, const int64_t **ids64, void **ws)
{
    *ws = NULL;
    if (ids->dtype == TR_I64) {
        *ids64 = ids->data;
    } else {
        int rc = tr_stage_scratch(ctx, (size_t)ids->numel * sizeof(int64_t), ws);
        if (rc) return rc;
        tr_convert(*ws, TR_I64, ids->data, ids->dtype, (size_t)ids->numel);
        *ids64 = *ws;
    }
    for (int64_t n = 0; n < ids->numel; n++) {
        int64_t id = (*ids64)[n];
        if (id < 0 || id >= V) {
            tr_stage_scratch_free(ctx, *ws);
            *ws = NULL;
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: id %lld at position %lld is outside the vocabulary of %lld rows; check that the "
                           "tokenizer belongs to the model (its vocabulary size must not exceed the "
                           "embedding's rows)",
                           op, (long long)id, (long long)n, (long long)V);
        }
    }
    return TR_OK;
}

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

static int embedding_impl(tr_ctx *ctx, int run, const tr_tensor *out, const tr_tensor *ids, const tr_tensor *table)
{
    const char *op = "embedding";
    int rc;
    if ((rc = shapes(ctx, op, "out", out, ids, table)))
        return rc;
    if (!run) return TR_OK;
    {
        int64_t V = table->shape[0], C = table->shape[1], N = ids->numel;
        const int64_t *id64;
        void *ws;
        if ((rc = load_ids(ctx, op, ids, V, &id64, &ws))) return rc;
        if (table->dtype == out->dtype) {
            /* a row copy needs no conversion: gather the raw bytes */
            size_t row = (size_t)C * tr_dtype_size(table->dtype);
#pragma omp parallel for if (N * C > 65536)
            for (int64_t n = 0; n < N; n++)
                memcpy((char *)out->data + n * row, (const char *)table->data + id64[n] * row, row);
        } else {
#pragma omp parallel for if (N * C > 65536)
            for (int64_t n = 0; n < N; n++)
                tr_convert((char *)out->data + n * C * tr_dtype_size(out->dtype), out->dtype,
                           (const char *)table->data + id64[n] * C * tr_dtype_size(table->dtype), table->dtype,
                           (size_t)C);
        }
        tr_stage_scratch_free(ctx, ws);
        return TR_OK;
    }
}

static int embedding_backward_impl(tr_ctx *ctx, int run, const tr_tensor *dtable, const tr_tensor *dout, const tr_tensor *ids,
                             int64_t padding_idx)
{
    const char *op = "embedding_backward";
    int rc;
    if ((rc = shapes(ctx, op, "dout", dout, ids, dtable)))
        return rc;
    if (!run) return TR_OK;
    {
        int64_t V = dtable->shape[0], C = dtable->shape[1];
        const int64_t *id64;
        void *ws;
        tr_stage vt;
        if ((rc = load_ids(ctx, op, ids, V, &id64, &ws))) return rc;
        /* dtable accumulates: a whole view (no copy when f32, the usual gradient dtype);
         * dout goes in blocks of rows */
        if ((rc = tr_stage_out_all(ctx, &vt, dtable, 1)) == TR_OK) {
            int64_t N = ids->numel, rows = tr_stage_block_rows(C);
            for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += rows) {
                int64_t nr = N - r0 < rows ? N - r0 : rows;
                tr_stage vd;
                if ((rc = tr_stage_in(ctx, &vd, dout, r0 * C, nr * C))) break;
                tr_k_embedding_bwd_f32(vt.p, vd.p, id64 + r0, nr, C, padding_idx);
                tr_stage_release(ctx, &vd);
            }
            if (rc == TR_OK) tr_stage_store_all(&vt, dtable);
            tr_stage_release(ctx, &vt);
        }
        tr_stage_scratch_free(ctx, ws);
        return rc;
    }
}

/* ------------------------------------------------------------ the op table */

TR_OP_IMPL_SLOTS(embedding, c->t[0], c->t[1], c->t[2])
TR_OP_IMPL_SLOTS(embedding_backward, c->t[0], c->t[1], c->t[2], c->i[0])

const tr_op_desc tr_opd_embedding = {
    "embedding", 3,
    { { "out", TR_ARG_OUT, TR_DT_FLOAT, 0 }, { "ids", TR_ARG_IN, TR_DT_INDEX, 0 },
      { "table", TR_ARG_IN, TR_DT_FLOAT, 0 } },
    embedding_check, { embedding_cpu, TR_CUDA_SLOT(embedding) } };
const tr_op_desc tr_opd_embedding_backward = {
    "embedding_backward", 3,
    { { "dtable", TR_ARG_ACC, TR_DT_FLOAT, 0 }, { "dout", TR_ARG_IN, TR_DT_FLOAT, 0 },
      { "ids", TR_ARG_IN, TR_DT_INDEX, 0 } },
    embedding_backward_check, { embedding_backward_cpu, TR_CUDA_SLOT(embedding_backward) } };

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
