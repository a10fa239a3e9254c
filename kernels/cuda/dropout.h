/* dropout.h — the dropout kernels (dropout.cu), the device twin of kernels/cpu/dropout.h; host
 * launchers with C linkage and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_DROPOUT_H
#define TR_KERNELS_CUDA_DROPOUT_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[i] (=) = x[i] * keep(offset + i) / (1 - p), the keep bits those of core/base/rng.h's
 * tr_dropout_mask_bits for the key (seed, step, layer, op): bit-identical to the CPU, so
 * the backward (the same call on dout) and a recomputation regenerate the mask. p in [0, 1]. */
int tr_k_dropout_cuda(void *out, int out_dt, const void *x, int x_dt, int64_t n, float p, uint64_t seed,
                      uint32_t step, uint32_t layer, uint32_t op, uint64_t offset, void *stream, tr_error *err);
/* keep[i] (=) = 1 or 0, exactly tr_dropout_mask_bits (for tests and masks kept by choice). */
int tr_k_dropout_mask_cuda(uint8_t *keep, int64_t n, float p, uint64_t seed, uint32_t step, uint32_t layer,
                           uint32_t op, uint64_t offset, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
