/* ops_nn_util.h — internal helpers of the ops_*.c files of ops_nn.h (not part of the
 * public API, not fed to the FFI): argument checks with uniform messages, workspace
 * scratch from the device allocator, and f32 staging of half-precision tensors.
 *
 * Staging: tr_nn_load gives an f32 pointer to elements [off, off+n) of a tensor: the
 * tensor's own memory when it is f32, else a converted copy in scratch; tr_nn_store
 * converts an f32 buffer back into the tensor (a no-op when the buffer is the tensor's
 * own memory). */
#ifndef TR_OPS_NN_UTIL_H
#define TR_OPS_NN_UTIL_H

#include "tensor.h"

/* "[4, 7]" into buf (at least 160 bytes); "NULL" for a NULL tensor. */
const char *tr_nn_shape(const tr_tensor *t, char *buf);

/* TR_OK, or TR_EUSER naming op and what when t is not f32/bf16/f16. */
int tr_nn_check_float(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *t);
/* TR_OK, or TR_EUSER when t is not f32 (parameter gradients, saved statistics). */
int tr_nn_check_f32(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *t);
/* Every non-NULL tensor in ts (n of them, named by names) is on ts[0]'s device (or the
 * first non-NULL's); *device receives it. */
int tr_nn_check_device(tr_ctx *ctx, const char *op, const tr_tensor *const *ts,
                       const char *const *names, int n, int *device);
/* TR_OK when t has exactly the shape (ndim dims), else TR_EUSER naming both shapes. */
int tr_nn_check_shape(tr_ctx *ctx, const char *op, const char *what, const tr_tensor *t,
                      int ndim, const int64_t *shape);

/* Workspace scratch from the CPU allocator (tag workspace); NULL-safe free. */
int tr_nn_scratch(tr_ctx *ctx, size_t nbytes, void **out);
void tr_nn_scratch_free(tr_ctx *ctx, void *p);

/* f32 view of elements [off, off+n) of t: *out points into t (f32) or into *owned
 * scratch (converted). Release *owned with tr_nn_scratch_free. */
int tr_nn_load(tr_ctx *ctx, const tr_tensor *t, int64_t off, int64_t n, float **out, void **owned);
/* f32 buffer for writing elements [off, off+n) of t: t's memory when f32, else scratch
 * (*owned); filled with t's current values only when `read` is set. */
int tr_nn_out(tr_ctx *ctx, tr_tensor *t, int64_t off, int64_t n, int read, float **out,
              void **owned);
/* Converts src (f32, n elements) into t at element off, unless src already is t's memory. */
void tr_nn_store(tr_tensor *t, int64_t off, const float *src, int64_t n);

/* Rows per chunk so that a chunk of row_elems-wide rows is about 1 Mi elements (>= 1). */
int64_t tr_nn_chunk_rows(int64_t row_elems);

#endif
