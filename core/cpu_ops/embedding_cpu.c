/* embedding_cpu.c — the CPU slots (checks and wrappers: core/ops/embedding.c): tensor-level embedding lookup and its
 * deterministic scatter-add backward over kernels/cpu/embedding.c. ids (i32 or i64) are validated against the
 * vocabulary before any kernel runs, so a bad id never reads or writes out of bounds. */
#include "ops_embedding.h"
#include "cpu_slot.h"
#include "cpu/embedding.h"
#include <string.h>

#define BWD(name) TR_ARGI(embedding_backward, name)

/* *ids64 = the ids as int64 (the tensor's data, or a workspace copy in *ws), checked to
 * lie in [0, V). */
static int load_ids(tr_ctx *ctx, const char *op, const tr_tensor *ids, int64_t V, const int64_t **ids64, void **ws)
{
    int rc = tr_stage_index(ctx, ids, ids64, ws);
    if (rc) return rc;
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

/* ------------------------------------------------------------ ops */

int tr_cpu_embedding(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *out = c->embedding.out, *ids = c->embedding.ids, *table = c->embedding.table;
    const int64_t V = table->shape[0], C = table->shape[1], N = ids->numel;
    const int64_t *id64;
    void *ws;
    int rc;
    if ((rc = load_ids(ctx, "embedding", ids, V, &id64, &ws))) return rc;
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
                       (const char *)table->data + id64[n] * C * tr_dtype_size(table->dtype), table->dtype, (size_t)C);
    }
    tr_stage_scratch_free(ctx, ws);
    return TR_OK;
}

/* dtable accumulates: a whole view (no copy when f32, the usual gradient dtype); dout goes
 * in blocks of rows, one row per id. */
static const unsigned char bwd_layout[TR_OP_MAX_TENSORS] = {[BWD(dtable)] = TR_ROWS_WHOLE, [BWD(dout)] = TR_ROWS_BLOCK};

static int bwd_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *ids64)
{
    tr_k_embedding_bwd_f32(p[BWD(dtable)], p[BWD(dout)], *(const int64_t **)ids64 + r0, nr, C, c->i[0]);
    return TR_OK;
}

int tr_cpu_embedding_backward(tr_ctx *ctx, tr_op_call *c)
{
    const tr_tensor *dtable = c->embedding_backward.dtable, *ids = c->embedding_backward.ids;
    const int64_t V = dtable->shape[0], C = dtable->shape[1];
    const int64_t *id64;
    void *ws;
    int rc;
    if ((rc = load_ids(ctx, "embedding_backward", ids, V, &id64, &ws))) return rc;
    rc = tr_stage_rows_by(ctx, &tr_opd_embedding_backward, c, bwd_layout, ids->numel, C, tr_stage_block_rows(C),
                          bwd_rows, &id64);
    tr_stage_scratch_free(ctx, ws);
    return rc;
}
