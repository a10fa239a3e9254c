/* rotary.h — rotary position embedding (RoPE) in the rotate-half convention of transformers'
 * Llama and ModernBERT (`q * cos + rotate_half(q) * sin`, rotate_half(x) = [-x2, x1] for the
 * halves x1 = x[..., :D/2], x2 = x[..., D/2:]), on x [B, T, H, D] with position t for
 * sequence index t:
 *   inv_freq[i] = 1 / theta^(2i / D),  a = t * inv_freq[i]   (i < D/2)
 *   out[i] = x[i] cos a - x[i + D/2] sin a,  out[i + D/2] = x[i + D/2] cos a + x[i] sin a
 * The backward is the inverse rotation (the transpose): the same kernel with `inverse` 1.
 * The angles are computed in REAL as transformers computes them in f32 (inv_freq from pow, then
 * one product with t). Rows r0 .. r0 + nr of the B*T rows of H*D elements (row r is position
 * r % T), so the staging loop may hand over blocks. _f32 is the runtime, _f64 the reference. */
#ifndef TR_KERNELS_CPU_ROTARY_H
#define TR_KERNELS_CPU_ROTARY_H

#include <stdint.h>

/* out[nr, H, D] (=) from x[nr, H, D], rows r0 .. r0 + nr; D even; out may alias x. */
void tr_k_rotary_f32(float *out, const float *x, int64_t r0, int64_t nr, int64_t T, int64_t H, int64_t D,
                     double theta, int inverse);
void tr_k_rotary_f64(double *out, const double *x, int64_t r0, int64_t nr, int64_t T, int64_t H, int64_t D,
                     double theta, int inverse);

/* The T positions' cos and sin as tr_k_rotary computes them: table[2t half + i] = cos a,
 * table[(2t + 1) half + i] = sin a (negated when inverse), a = t inv_freq[i], half = D / 2;
 * T * D elements. */
void tr_k_rotary_table_f32(float *table, int64_t T, int64_t D, double theta, int inverse);
void tr_k_rotary_table_f64(double *table, int64_t T, int64_t D, double theta, int inverse);

/* tr_k_rotary on rows r0 .. r0 + nr with the positions' table made once (tr_k_rotary_table):
 * the same values, one thread, for a caller that hands over small blocks of rows. */
void tr_k_rotary_rows_f32(float *out, const float *x, const float *table, int64_t r0, int64_t nr, int64_t T, int64_t H,
                          int64_t D);
void tr_k_rotary_rows_f64(double *out, const double *x, const double *table, int64_t r0, int64_t nr, int64_t T,
                          int64_t H, int64_t D);

#endif
