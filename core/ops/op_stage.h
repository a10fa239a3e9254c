/* op_stage.h — the conversions under the CPU slots' staging loop (core/cpu_ops/stage_rows.h):
 * f32 access to tensors of any float dtype. Internal to core/ (not part of trainer.h).
 *
 * tr_stage_buf gives a float pointer to elements [off, off + n) of a tensor: the tensor's
 * own data when it is f32, else a workspace block (tag TR_TAG_WORKSPACE) of the CPU
 * allocator, filled with the converted values (by all cores) when the caller reads it.
 * tr_stage_put converts such a block back (a no-op when it is the tensor's own memory) and
 * tr_stage_scratch_free returns it. Ops walk big half tensors in blocks of rows
 * (tr_stage_block_rows), so the workspace stays near TR_STAGE_BLOCK elements per operand
 * whatever the tensor size. */
#ifndef TR_OP_STAGE_H
#define TR_OP_STAGE_H

#include "tensor.h"

/* Elements per block: 1 Mi (4 MiB of f32 per operand). */
enum { TR_STAGE_BLOCK = 1048576 };

/* Is dtype one of f32, bf16, f16? */
int tr_stage_is_float(int dtype);
/* Rows of C elements per block: TR_STAGE_BLOCK / C, at least 1. */
int64_t tr_stage_block_rows(int64_t C);

/* *out points into t (f32) or into *owned (converted; release with tr_stage_scratch_free),
 * filled only when `read`; t NULL gives *out = NULL. */
int tr_stage_buf(tr_ctx *ctx, const tr_tensor *t, int64_t off, int64_t n, int read, float **out, void **owned);
/* Converts src back into t at element off unless src already is t's memory. */
void tr_stage_put(const tr_tensor *t, int64_t off, const float *src, int64_t n);

/* *out = the values of index tensor t (i32 or i64) as int64: t's data when it is i64, else
 * a copy in *owned (release with tr_stage_scratch_free). */
int tr_stage_index(tr_ctx *ctx, const tr_tensor *t, const int64_t **out, void **owned);

/* A workspace block of `bytes` from the CPU allocator; NULL-safe free. */
int tr_stage_scratch(tr_ctx *ctx, size_t bytes, void **out);
void tr_stage_scratch_free(tr_ctx *ctx, void *p);

/* Elementwise work over operands of any float dtype, span by span on each thread: for each
 * span of at most TR_STAGE_SPAN elements, a and b (NULL: none) are read as f32 (their own
 * memory when f32, else converted into buffers on the thread's stack), fn(arg, Y, A, B, n)
 * computes the span on the calling thread (no OpenMP region of its own), and Y goes back
 * into y (written in place when y is f32). The span is in L1 from conversion to store,
 * where blocks staged through workspace made three passes over 4 MiB buffers. a, b and y
 * have one number of elements; y may alias a or b (a span is read before it is written). */
enum { TR_STAGE_SPAN = 2048 };
typedef void (*tr_stage_span_fn)(const void *arg, float *y, const float *a, const float *b, int64_t n);
void tr_stage_spans(const tr_tensor *y, const tr_tensor *a, const tr_tensor *b, tr_stage_span_fn fn, const void *arg);

/* tr_convert split into chunks converted by all cores. */
void tr_stage_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n);

#endif
