/* layernorm.h — layer normalisation over the last dimension of x[N, C]:
 * out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps), var biased (as
 * torch.nn.LayerNorm). Forward saves mean[N] and rstd[N] for the backward. Rows are
 * processed in parallel (OpenMP). _f32 is the runtime, _f64 the test reference. */
#ifndef TR_KERNELS_CPU_LAYERNORM_H
#define TR_KERNELS_CPU_LAYERNORM_H

#include <stdint.h>

/* The forward and the input gradient take rows in groups of this many (their sums run across
 * the group's rows at once); a caller that hands the kernels blocks of rows sizes them with
 * tr_k_layernorm_block_rows, so that no block ends in a short group. */
enum { TR_K_LAYERNORM_ROW_GROUP = 8 };

/* The rows of C elements that fit in `elems` (at least 1), rounded down to a multiple of the
 * row group where one group fits. */
static inline int64_t tr_k_layernorm_block_rows(int64_t elems, int64_t C)
{
    int64_t rows = C > 0 && elems / C > 0 ? elems / C : 1;
    return rows >= TR_K_LAYERNORM_ROW_GROUP ? rows - rows % TR_K_LAYERNORM_ROW_GROUP : rows;
}

/* out[N,C] (=), mean[N] (=), rstd[N] (=); bias may be NULL (no shift). */
void tr_k_layernorm_fwd_f32(float *out, float *mean, float *rstd, const float *x,
                              const float *weight, const float *bias, int64_t N, int64_t C,
                              float eps);
void tr_k_layernorm_fwd_f64(double *out, double *mean, double *rstd, const double *x,
                              const double *weight, const double *bias, int64_t N, int64_t C,
                              double eps);

/* dx[N,C] OVERWRITES (may be NULL); dweight[C] and dbias[C] ACCUMULATE and may be NULL
 * (frozen parameters). mean and rstd are those the forward saved. */
void tr_k_layernorm_bwd_f32(float *dx, float *dweight, float *dbias, const float *dout,
                               const float *x, const float *weight, const float *mean,
                               const float *rstd, int64_t N, int64_t C);
void tr_k_layernorm_bwd_f64(double *dx, double *dweight, double *dbias, const double *dout,
                               const double *x, const double *weight, const double *mean,
                               const double *rstd, int64_t N, int64_t C);

#endif
