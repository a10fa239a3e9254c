/* device_errors.c — the host's read of a device's error word (contract in device_errors.h).
 * The messages are the CPU slots' (core/ops/embedding.c, core/ops/loss.c), word for word,
 * then where the error was found, so a bad id reads the same on every device. */
#include "device_errors.h"

#ifdef TR_HAVE_CUDA

#include "cuda_device.h"
#include "cuda/cuda_check.h"
#include "cuda/index_check.h"

#include <cuda_runtime.h>
#include "cuda_sync.h"

static const char *op_name(int64_t op)
{
    switch (op) {
    case TR_K_INDEX_EMBEDDING: return "embedding";
    case TR_K_INDEX_EMBEDDING_BACKWARD: return "embedding_backward";
    case TR_K_INDEX_CROSS_ENTROPY: return "cross_entropy";
    case TR_K_INDEX_CROSS_ENTROPY_BACKWARD: return "cross_entropy_backward";
    default: return "an index check";
    }
}

int tr_device_errors_check(tr_ctx *ctx, int device)
{
    if (device < 0 || device >= tr_cuda_device_count()) return TR_OK;
    tr_error *err = tr_ctx_err(ctx);
    void *state = tr_ctx_cuda_state(ctx, device);
    if (!state) return err->status != TR_OK ? err->status : TR_EINTERNAL;
    tr_k_index_error *word = tr_cuda_index_error(state), w;
    cudaStream_t stream = (cudaStream_t)tr_cuda_stream(state);
    int rc;
    if ((rc = tr_cuda_set_current(state, err)) != TR_OK ||
        (rc = TR_CUDA_CALL(err, tr_copy_to_host_async(&w, word, sizeof w, stream))) != TR_OK ||
        (rc = TR_CUDA_CALL(err, tr_sync_stream(stream))) != TR_OK)
        return rc;
    if (w.op == 0) return TR_OK;
    if ((rc = TR_CUDA_CALL(err, cudaMemsetAsync(word, 0, sizeof *word, stream))) != TR_OK) return rc;
    const char *op = op_name(w.op);
    if (w.op == TR_K_INDEX_EMBEDDING || w.op == TR_K_INDEX_EMBEDDING_BACKWARD)
        return tr_fail(err, TR_EUSER,
                       "%s: id %lld at position %lld is outside the vocabulary of %lld rows; check that the "
                       "tokenizer belongs to the model (its vocabulary size must not exceed the embedding's rows). "
                       "(Found on cuda:%d by the ids' check on the device, reported at the next synchronisation.)",
                       op, (long long)w.value, (long long)w.position, (long long)w.limit, device);
    return tr_fail(err, TR_EUSER,
                   "%s: target %lld at row %lld is not a class index in [0, %lld) nor the ignore_index %lld; check "
                   "the label column and the number of labels. (Found on cuda:%d by the targets' check on the "
                   "device, reported at the next synchronisation.)",
                   op, (long long)w.value, (long long)w.position, (long long)w.limit, (long long)w.ignore_index,
                   device);
}

#else

int tr_device_errors_check(tr_ctx *ctx, int device)
{
    (void)ctx;
    (void)device;
    return TR_OK;
}

#endif
