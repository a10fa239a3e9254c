/* embedding_cpu.c — the CPU slots (checks and wrappers: core/ops/embedding.c): tensor-level embedding lookup and its
 * deterministic scatter-add backward over kernels/cpu/embedding.c. ids (i32 or i64) are validated against the
 * vocabulary before any kernel runs, so a bad id never reads or writes out of bounds. */
#include "ops_elem.h"
#include "cpu_slot.h"
#include "cpu/embedding.h"
#include <string.h>

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

/* ------------------------------------------------------------ ops */

static int embedding_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *ids, const tr_tensor *table)
{
    const char *op = "embedding";
    int rc;
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

static int embedding_backward_run(tr_ctx *ctx, const tr_tensor *dtable, const tr_tensor *dout, const tr_tensor *ids,
                                  int64_t padding_idx)
{
    const char *op = "embedding_backward";
    int rc;
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

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(embedding, embedding_run, c->embedding.out, c->embedding.ids, c->embedding.table)
TR_CPU_SLOT_BY(embedding_backward, embedding_backward_run, c->embedding_backward.dtable, c->embedding_backward.dout,
               c->embedding_backward.ids, c->i[0])
