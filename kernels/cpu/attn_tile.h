/* attn_tile.h — register-blocked f32 matrix products for the attention's per-block tiles
 * (kernels/cpu/attention.c), with f32 accumulation, in AVX-512 and AVX2 + FMA, chosen
 * at run time by the CPU (the binary never assumes the build machine's ISA).
 *
 * Why not BLAS: the tiles are small (64 query rows x T keys x D = 32..64) and OpenBLAS sends
 * them to its small-matrix kernels plus a beta pass and a packing copy per call; measured at
 * 90-140 GFLOP/s on 2 AVX-512 cores where the large GEMMs reach ~270. Here the operand that
 * is read as whole vectors (B) is used in place (its rows are contiguous: q, k, v, dout rows
 * or a packed K^T / V^T, see tr_attn_tile_pack_t), and A is read by broadcasts, so no call
 * copies anything.
 *
 * One product form covers all six attention products:
 *   C[M, N] (=, or += when accumulate) alpha * rs[i] * sum_k A(i, k) B[k, n]
 * A(i, k) = A[i*lda + k] (trans_a 0) or A[k*lda + i] (trans_a 1, the dV += P^T dO and
 * dK += dS^T Q forms); rs NULL means 1. Any M, N, K >= 0 is correct (the last vector of a
 * row is a masked load and store). Results depend only on the arguments and the ISA: no
 * threads, no state. */
#ifndef TR_KERNELS_CPU_ATTN_TILE_H
#define TR_KERNELS_CPU_ATTN_TILE_H

#include <stdint.h>

/* The product paths; BLAS is the cblas fallback of attention.c (and the baseline ISA). */
enum { TR_ATTN_ISA_BLAS = 0, TR_ATTN_ISA_AVX2 = 1, TR_ATTN_ISA_AVX512 = 2 };

/* The widest path this CPU runs (AVX512 needs avx512f, AVX2 needs avx2 and fma). */
int tr_attn_tile_isa(void);
/* 1 when this CPU runs isa (BLAS always), else 0. */
int tr_attn_tile_usable(int isa);

/* The product above on isa (AVX2 or AVX512, which the caller checked with
 * tr_attn_tile_usable). C must not overlap A or B. */
void tr_attn_tile_gemm(int isa, int trans_a, float *C, int64_t ldc, const float *A, int64_t lda,
                       const float *B, int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *rs, int accumulate);

/* How many column panels of a row of N columns run the kernels whose last vector is a masked
 * load and store, on isa (AVX2 or AVX512, checked as for the product): 1 where N is not a whole
 * number of vectors, else 0. AVX2's masked store is microcode on AMD's Zen 2 and 3 (attn_tile_kern.h),
 * so a whole panel must take the plain one; for the tests. */
int tr_attn_tile_masked_panels(int isa, int64_t N);

/* dst[c*ldd + r] (=) src[r*lds + c] for r < rows, c < cols, and 0 for rows <= r < ldd: the
 * transpose of a head's k or v ([T, D] rows of stride H*D) as [D, Tp], its padding key
 * columns zero, so that the score products run whole vectors over Tp columns. */
void tr_attn_tile_pack_t(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                         int64_t cols);

/* The row reductions of the attention's softmax steps over x[0, n): max (NaN entries are
 * skipped, as `x > m ? x : m` does), sum and dot product, on isa (any; BLAS runs portable
 * code). GCC's `omp simd` reductions end in a scalar loop over the vector's lanes through
 * the stack, a 16-deep dependency chain per 128-float score row (measured: a quarter of
 * softmax_block); these keep two vector accumulators and reduce in registers. */
float tr_attn_row_max(int isa, const float *x, int64_t n);
float tr_attn_row_sum(int isa, const float *x, int64_t n);
float tr_attn_row_dot(int isa, const float *x, const float *y, int64_t n);

#endif
