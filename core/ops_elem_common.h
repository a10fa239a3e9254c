/* ops_elem_common.h — what the opselem tensor-level ops (core/ops_*.c declared in
 * core/ops_elem.h) share: f32 views of tensors of any float dtype, parallel bulk
 * conversion, and shape formatting for messages. Internal to core/ (not part of
 * trainer.h), but plain C that ffi.cdef would accept.
 *
 * A view gives an op a float pointer to a tensor's elements: the tensor's own data
 * when it is f32, else a copy converted into a workspace block (tag TR_TAG_WORKSPACE)
 * that tr_elem_view_finish converts back (outputs) and tr_elem_view_release returns to
 * the allocator. Every view acquired is released before the op returns, on success and
 * on error alike. Ops walk big half tensors in blocks of rows (tr_elem_block_rows), so
 * the workspace stays near TR_ELEM_BLOCK elements per operand whatever the tensor size. */
#ifndef TR_OPS_ELEM_COMMON_H
#define TR_OPS_ELEM_COMMON_H

#include "tensor.h"

typedef struct tr_elem_view {
    float *p;        /* n floats: the tensor's data or the workspace copy */
    void *ws;        /* the workspace block, NULL when p is the tensor's data */
    size_t n;
} tr_elem_view;

/* Is dtype one of f32, bf16, f16? */
int tr_elem_is_float(int dtype);

/* Elements per block: 1 Mi (4 MiB of f32 per operand). */
enum { TR_ELEM_BLOCK = 1048576 };

/* Rows of C elements per block: TR_ELEM_BLOCK / C, at least 1. */
int64_t tr_elem_block_rows(int64_t C);

/* Views of the elements [start, start + n) of t; the range versions of the calls below. */
int tr_elem_view_in_range(tr_ctx *ctx, tr_elem_view *v, const tr_tensor *t, int64_t start, int64_t n);
int tr_elem_view_out_range(tr_ctx *ctx, tr_elem_view *v, tr_tensor *t, int64_t start, int64_t n, int load);
void tr_elem_view_finish_range(tr_elem_view *v, tr_tensor *t, int64_t start);

/* An input view: p holds the tensor's values as float. t may be NULL (v->p = NULL). */
int tr_elem_view_in(tr_ctx *ctx, tr_elem_view *v, const tr_tensor *t);
/* An output view; load = 1 copies the current values in (for += and in-place ops). */
int tr_elem_view_out(tr_ctx *ctx, tr_elem_view *v, tr_tensor *t, int load);
/* Writes an output view's values back into t (no-op when p is t's data). */
void tr_elem_view_finish(tr_elem_view *v, tr_tensor *t);
/* Returns the workspace (if any) to the allocator; safe on a zeroed or released view. */
void tr_elem_view_release(tr_ctx *ctx, tr_elem_view *v);

/* A workspace block of `bytes` from the CPU allocator (tag workspace); release with
 * tr_elem_ws_free. */
int tr_elem_ws_alloc(tr_ctx *ctx, size_t bytes, void **out);
void tr_elem_ws_free(tr_ctx *ctx, void *p);

/* tr_convert split into chunks converted by all cores. */
void tr_elem_convert_parallel(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n);

/* "[4, 7] bf16" into buf (always NUL-terminated); returns buf. */
const char *tr_elem_describe(char *buf, size_t len, const tr_tensor *t);

/* TR_EUSER with "<op>: <name> ..." unless t is non-NULL, on `device`, with a float dtype
 * (tr_elem_want_float) or an integer dtype i32/i64 (tr_elem_want_index). */
int tr_elem_want_float(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int device);
int tr_elem_want_index(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int device);
/* TR_EUSER unless t has `numel` elements; `what` says what that number is. */
int tr_elem_want_numel(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int64_t numel,
                       const char *what);
/* The error every op returns for a device it has no path for yet. */
int tr_elem_no_device(tr_ctx *ctx, const char *op, int device);

/* Splits t into N rows of its last dimension C (ndim 0: N = C = 1). */
void tr_elem_rows(const tr_tensor *t, int64_t *N, int64_t *C);

#endif
