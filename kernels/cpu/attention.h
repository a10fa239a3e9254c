/* attention.h — scaled-dot-product attention on the CPU that never holds a T x T matrix.
 *
 * Layout: q, k, v, out are [B, T, H, D] (the [B, T, H*D] output of the projection Linears,
 * so no transposes); lse is [B, H, T]; the key padding mask is [B, T] (i32 or f32, nonzero
 * = keep, 0 = pad; NULL = none). P = softmax(scale * q k^T + mask) per (b, h), then
 * attention-probability dropout, out = P v.
 *
 * Tiling: query rows are processed in blocks of TR_ATTN_BLOCK per (b, h); each thread owns
 * a scratch (block buffers of TR_ATTN_BLOCK x Tp values, Tp = T rounded up to
 * TR_ATTN_ROW_ALIGN, and the head's packed k^T and v^T), which the caller provides (see
 * tr_k_attention_scratch_elems) so that it shows in the allocator's workspace ledger.
 * Scores of a block are a matrix product, softmax is two-pass over the block's full key
 * row, and the backward recomputes the block's probabilities from q, k and lse. The float
 * products run on attn_tile.h's micro-kernels where the CPU has AVX-512 or AVX2 (chosen at
 * run time), else on cblas_sgemm; the double kernels, the tests' reference, on cblas_dgemm.
 *
 * Dropout: element (b, h, i, j) has stream index ((b*H + h)*T + i)*T + j; it is kept when
 * its uniform >= p and then scaled by 1/(1-p). The keep masks come from drop->keep (the
 * keyed counter RNG in the runtime, tr_dropout_mask_words), a whole query block's rows in one
 * call (they are consecutive in the stream), so the backward regenerates the forward's mask.
 *
 * Relative-position bias (rel, tr_attn_relpos): the score of query i and key j in head h
 * gains table[bucket(j - i), h] after the scaling (attn_bucket.h), added to each block's score
 * rows from a per-head row of the 2T - 1 relative positions' biases, never a T x T matrix.
 * The backward sums the scores' gradient per relative position and head into rel->dist, then
 * into the table's gradient per bucket, in a fixed order (the same bits whatever the threads).
 *
 * Query rows (rel->query_rows = n, 0 < n < T; a classifier's last layer, which reads each
 * sequence's first row only): only queries 0 .. n-1 are computed. The other rows of out are 0
 * and of lse -inf (as a row with no keys), their dout is never read, and their dq is 0, so dk
 * and dv hold the first n rows' part alone: the full call's bits wherever the full call's dout
 * is 0 past row n. A computed row goes through the same block steps (its block's key range and
 * stride included) as in the full call, so its bits are the full call's.
 *
 * Window (rel->window = w > 0, ModernBERT's local layers): query i sees keys j with |i - j| <= w.
 * A block of queries [i0, i0 + nb) computes its scores over keys [i0 - w, i0 + nb + w) only, so a
 * local layer costs O(T x w); those products run on BLAS (the tile paths' packed k^T spans every
 * key). The backward zeroes dk and dv first and adds each block's key range into them.
 *
 * A row whose keys are all masked has out = 0, zero gradients and lse = -inf (no NaN). */
#ifndef TR_KERNELS_CPU_ATTENTION_H
#define TR_KERNELS_CPU_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

enum { TR_ATTN_BLOCK = 64, TR_ATTN_SCRATCH_BUFS = 3, TR_ATTN_ROW_ALIGN = 16 };

/* Fills mask[i] (=) with 0xFFFFFFFF when stream element offset + i is kept (its uniform >= p),
 * else 0 (tr_dropout_mask_words). */
typedef void (*tr_keep_fn)(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset);

typedef struct tr_attn_dropout {
    float p;                  /* probability of dropping, in [0, 1) */
    tr_keep_fn keep;
    const void *key;          /* passed to keep */
} tr_attn_dropout;

/* A relative-position bias table and its bucketing (T5's, MPNet's), the window and the query
 * rows: what a call adds to plain attention. The pointers are of the kernel's type (float for
 * _f32, double for _f64). */
typedef struct tr_attn_relpos {
    const void *table;        /* [nbuckets, H], or NULL: no bias */
    void *dtable;             /* backward: [nbuckets, H] (+=), or NULL: no table gradient */
    void *dist;               /* backward with dtable: scratch of B*H*(2T-1) elements */
    int64_t nbuckets, max_distance;
    int bidirectional;
    int64_t window;           /* 0: every key; w > 0: query i sees keys j with |i - j| <= w (not with a table) */
    int64_t query_rows;       /* 0 or T: every query; 0 < n < T: queries 0 .. n-1 only (above) */
} tr_attn_relpos;

/* Threads the kernels will use (omp_get_max_threads(), 1 without OpenMP) and the scratch
 * they need for that many threads and heads of D values, in elements of the kernel's type. */
int tr_k_attention_threads(void);
size_t tr_k_attention_scratch_elems(int64_t T, int64_t D, int nthreads);
/* The stride of a block's score rows: T rounded up to TR_ATTN_ROW_ALIGN. */
int64_t tr_k_attention_row_stride(int64_t T);

/* out[B,T,H,D] (=), lse[B,H,T] (=). mask_dtype is TR_I32 or TR_F32 (ignored when mask is
 * NULL); drop NULL or p == 0 means no dropout. scale is usually 1/sqrt(D). scratch has
 * tr_k_attention_scratch_elems(T, D, nthreads) elements. */
void tr_k_attention_fwd_f32(float *out, float *lse, const float *q, const float *k,
                              const float *v, const void *mask, int mask_dtype,
                              const tr_attn_dropout *drop, float scale, int64_t B, int64_t T,
                              int64_t H, int64_t D, float *scratch, int nthreads);
void tr_k_attention_fwd_f64(double *out, double *lse, const double *q, const double *k,
                              const double *v, const void *mask, int mask_dtype,
                              const tr_attn_dropout *drop, double scale, int64_t B, int64_t T,
                              int64_t H, int64_t D, double *scratch, int nthreads);

/* dq, dk, dv [B,T,H,D] all OVERWRITE. lse is the forward's; mask, drop and scale must be
 * the forward's too. */
void tr_k_attention_bwd_f32(float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v,
                               const float *lse, const void *mask, int mask_dtype,
                               const tr_attn_dropout *drop, float scale, int64_t B, int64_t T,
                               int64_t H, int64_t D, float *scratch, int nthreads);
void tr_k_attention_bwd_f64(double *dq, double *dk, double *dv, const double *dout,
                               const double *q, const double *k, const double *v,
                               const double *lse, const void *mask, int mask_dtype,
                               const tr_attn_dropout *drop, double scale, int64_t B, int64_t T,
                               int64_t H, int64_t D, double *scratch, int nthreads);

/* The kernels above with a relative-position bias (rel NULL: none, as above). */
void tr_k_attention_fwd_rel_f32(float *out, float *lse, const float *q, const float *k, const float *v,
                                const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                                const tr_attn_relpos *rel, float scale, int64_t B, int64_t T, int64_t H,
                                int64_t D, float *scratch, int nthreads);
void tr_k_attention_fwd_rel_f64(double *out, double *lse, const double *q, const double *k, const double *v,
                                const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                                const tr_attn_relpos *rel, double scale, int64_t B, int64_t T, int64_t H,
                                int64_t D, double *scratch, int nthreads);
void tr_k_attention_bwd_rel_f32(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                const float *k, const float *v, const float *lse, const void *mask,
                                int mask_dtype, const tr_attn_dropout *drop, const tr_attn_relpos *rel,
                                float scale, int64_t B, int64_t T, int64_t H, int64_t D, float *scratch,
                                int nthreads);
void tr_k_attention_bwd_rel_f64(double *dq, double *dk, double *dv, const double *dout, const double *q,
                                const double *k, const double *v, const double *lse, const void *mask,
                                int mask_dtype, const tr_attn_dropout *drop, const tr_attn_relpos *rel,
                                double scale, int64_t B, int64_t T, int64_t H, int64_t D, double *scratch,
                                int nthreads);

/* The float kernels above on bf16 q, k, v, out, dout, dq, dk, dv (lse, the mask and the bias
 * table as above, f32): each task converts its head's rows into the thread's f32 copies and
 * rounds its results back, so no whole tensor is staged, and the results are the bits of the
 * float kernels on the same values rounded once to bf16. scratch has
 * tr_k_attention_bf16_scratch_elems(T, D, nthreads) floats. Not for the calls that
 * tr_k_attention_bf16_usable declines (a relative-position table or not, a window w or 0):
 * those run attn_short.h's registers path on f32. */
int tr_k_attention_bf16_usable(int64_t T, int64_t D, int use_dropout, int has_table, int64_t window);
size_t tr_k_attention_bf16_scratch_elems(int64_t T, int64_t D, int nthreads);
void tr_k_attention_fwd_bf16(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                             const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                             const tr_attn_relpos *rel, float scale, int64_t B, int64_t T, int64_t H, int64_t D,
                             float *scratch, int nthreads);
void tr_k_attention_bwd_bf16(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout, const uint16_t *q,
                             const uint16_t *k, const uint16_t *v, const float *lse, const void *mask, int mask_dtype,
                             const tr_attn_dropout *drop, const tr_attn_relpos *rel, float scale, int64_t B,
                             int64_t T, int64_t H, int64_t D, float *scratch, int nthreads);

/* The same kernels on a chosen product path (TR_ATTN_ISA_*, attn_tile.h), for the tests that
 * run every path this CPU has; a path the CPU lacks runs the cblas one, and the double
 * kernels always do. The entry points above pass tr_attn_tile_isa(). */
void tr_k_attention_fwd_isa_f32(int isa, float *out, float *lse, const float *q, const float *k,
                                const float *v, const void *mask, int mask_dtype,
                                const tr_attn_dropout *drop, float scale, int64_t B, int64_t T,
                                int64_t H, int64_t D, float *scratch, int nthreads);
void tr_k_attention_bwd_isa_f32(int isa, float *dq, float *dk, float *dv, const float *dout,
                                const float *q, const float *k, const float *v, const float *lse,
                                const void *mask, int mask_dtype, const tr_attn_dropout *drop,
                                float scale, int64_t B, int64_t T, int64_t H, int64_t D,
                                float *scratch, int nthreads);
void tr_k_attention_fwd_isa_f64(int isa, double *out, double *lse, const double *q,
                                const double *k, const double *v, const void *mask,
                                int mask_dtype, const tr_attn_dropout *drop, double scale,
                                int64_t B, int64_t T, int64_t H, int64_t D, double *scratch,
                                int nthreads);
void tr_k_attention_bwd_isa_f64(int isa, double *dq, double *dk, double *dv, const double *dout,
                                const double *q, const double *k, const double *v,
                                const double *lse, const void *mask, int mask_dtype,
                                const tr_attn_dropout *drop, double scale, int64_t B, int64_t T,
                                int64_t H, int64_t D, double *scratch, int nthreads);

#endif
