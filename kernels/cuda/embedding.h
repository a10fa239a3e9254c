/* embedding.h — the embedding lookup kernels (embedding.cu), the device twin of
 * kernels/cpu/embedding.h; host launchers with C linkage and no CUDA types, under launcher.h's
 * contract. */
#ifndef TR_KERNELS_CUDA_EMBEDDING_H
#define TR_KERNELS_CUDA_EMBEDDING_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* out[N,C] (=) = table[ids[n], :]; ids int64 in [0, V) or -1 (a bad id the op's device check
 * replaced: its row is 0). */
int tr_k_embedding_fwd_cuda(void *out, int out_dt, const int64_t *ids, const void *table, int table_dt, int64_t N,
                            int64_t C, void *stream, tr_error *err);
/* dtable[V,C] (+=, f32) += dout[n, :] at row ids[n], rows equal to padding_idx skipped
 * (padding_idx < 0: none) and ids of -1 (bad ids, above) skipped. Deterministic: each thread
 * owns one column and walks the tokens in order. */
int tr_k_embedding_bwd_cuda(float *dtable, const void *dout, int dout_dt, const int64_t *ids, int64_t N, int64_t C,
                            int64_t padding_idx, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
