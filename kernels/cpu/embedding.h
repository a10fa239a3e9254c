/* embedding.h — CPU embedding lookup and its scatter-add backward, _f32 and _f64.
 * ids are int64 in [0, V) (the tensor-level op validates them and converts int32 ids).
 * Gradient contract: embedding_backward ACCUMULATES into dtable (+=), deterministically. */
#ifndef TR_KERNELS_CPU_EMBEDDING_H
#define TR_KERNELS_CPU_EMBEDDING_H

#include <stdint.h>

void tr_k_embedding_fwd_f32(float *out, const int64_t *ids, const float *table, int64_t N, int64_t C);
void tr_k_embedding_fwd_f64(double *out, const int64_t *ids, const double *table, int64_t N, int64_t C);
void tr_k_embedding_bwd_f32(float *dtable, const float *dout, const int64_t *ids, int64_t N, int64_t C,
                            int64_t padding_idx);
void tr_k_embedding_bwd_f64(double *dtable, const double *dout, const int64_t *ids, int64_t N, int64_t C,
                            int64_t padding_idx);

#endif
