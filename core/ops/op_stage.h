/* op_stage.h — the one staging helper of the CPU ops: f32 access to tensors of any float
 * dtype. Internal to core/ (not part of trainer.h).
 *
 * A stage gives an op a float pointer to elements [start, start + n) of a tensor: the
 * tensor's own data when it is f32, else a copy converted (by all cores) into a workspace
 * block (tag TR_TAG_WORKSPACE) of the CPU allocator. tr_stage_store converts an output
 * stage back (a no-op when it is the tensor's own memory) and tr_stage_release returns
 * the block. Every stage acquired is released before the op returns, on success and on
 * error alike. Ops walk big half tensors in blocks of rows (tr_stage_block_rows), so the
 * workspace stays near TR_STAGE_BLOCK elements per operand whatever the tensor size.
 *
 * Two spellings of the same thing: the tr_stage struct (in, out, store, release), and a
 * pointer pair (float pointer + owned block: load, buf, put, scratch_free) for loops that
 * keep a row pointer. */
#ifndef TR_OP_STAGE_H
#define TR_OP_STAGE_H

#include "tensor.h"

typedef struct tr_stage {
    float *p;  /* n floats: the tensor's data or the workspace copy */
    void *ws;  /* the workspace block, NULL when p is the tensor's data */
    size_t n;
} tr_stage;

/* Elements per block: 1 Mi (4 MiB of f32 per operand). */
enum { TR_STAGE_BLOCK = 1048576 };

/* Is dtype one of f32, bf16, f16? */
int tr_stage_is_float(int dtype);
/* Rows of C elements per block: TR_STAGE_BLOCK / C, at least 1. */
int64_t tr_stage_block_rows(int64_t C);

/* An input stage of elements [start, start + n); t NULL gives p = NULL. */
int tr_stage_in(tr_ctx *ctx, tr_stage *s, const tr_tensor *t, int64_t start, int64_t n);
/* An output stage; load = 1 copies the current values in (for += and in-place ops). */
int tr_stage_out(tr_ctx *ctx, tr_stage *s, const tr_tensor *t, int64_t start, int64_t n, int load);
/* Writes an output stage back into t at element start (no-op when p is t's data). */
void tr_stage_store(tr_stage *s, const tr_tensor *t, int64_t start);
/* Returns the workspace (if any); safe on a zeroed or released stage. */
void tr_stage_release(tr_ctx *ctx, tr_stage *s);
/* The whole tensor (start 0, n = numel). */
int tr_stage_in_all(tr_ctx *ctx, tr_stage *s, const tr_tensor *t);
int tr_stage_out_all(tr_ctx *ctx, tr_stage *s, const tr_tensor *t, int load);
void tr_stage_store_all(tr_stage *s, const tr_tensor *t);

/* Pointer-pair spelling: *out points into t (f32) or into *owned (converted). Release
 * *owned with tr_stage_scratch_free. tr_stage_buf fills the buffer only when `read`;
 * tr_stage_put converts src back into t unless src already is t's memory. */
int tr_stage_load(tr_ctx *ctx, const tr_tensor *t, int64_t off, int64_t n, float **out, void **owned);
int tr_stage_buf(tr_ctx *ctx, const tr_tensor *t, int64_t off, int64_t n, int read, float **out, void **owned);
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
