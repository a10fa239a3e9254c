/* tensor.h — tensors: contiguous, row-major, one dtype, on one device, owning a
 * reference to a storage that came from that device's caching allocator with a tag.
 *
 * Invariants: data == storage base + byte offset; numel == product of shape (1 for
 * ndim 0); a view (reshape, narrow on dim 0) shares the storage and keeps it alive; the
 * storage returns to its allocator when its last tensor is freed. Memory is freed by
 * tr_tensor_free, deterministically, never by a garbage collector. */
#ifndef TR_TENSOR_H
#define TR_TENSOR_H

#include "ctx.h"

typedef struct tr_storage tr_storage;

typedef struct tr_tensor {
    void *data;              /* first element */
    tr_storage *storage;
    int64_t shape[8];
    int64_t numel;
    int32_t ndim;            /* 0..8 */
    int32_t dtype;           /* tr_dtype */
    int32_t device;          /* TR_CPU or a CUDA ordinal */
    int32_t tag;             /* tr_tag of the storage */
} tr_tensor;

/* A new uninitialised tensor; NULL with ctx's error set (TR_EOOM when the allocator
 * refused). */
tr_tensor *tr_tensor_new(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int device, int tag);
tr_tensor *tr_tensor_zeros(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int device, int tag);
/* A view with another shape of the same numel, sharing the storage. */
tr_tensor *tr_tensor_reshape(tr_ctx *ctx, tr_tensor *t, int ndim, const int64_t *shape);
/* A view of rows [start, start+len) along dim 0, sharing the storage. */
tr_tensor *tr_tensor_narrow(tr_ctx *ctx, tr_tensor *t, int64_t start, int64_t len);
/* Frees the tensor header and drops its storage reference. NULL is a no-op. */
void tr_tensor_free(tr_tensor *t);
size_t tr_tensor_nbytes(const tr_tensor *t);

/* dst = src with dtype conversion, across devices too (cpu <-> cuda:N, cuda:N <-> cuda:M);
 * shapes must have equal numel. With a GPU involved (core/cuda_device/cuda_copy.h): queued on
 * the destination device's stream; returns after the data arrived when either side is the
 * host; device -> device copies are only queued. */
int tr_tensor_copy(tr_ctx *ctx, tr_tensor *dst, const tr_tensor *src);
/* Every element = value (converted to the tensor's dtype); on a GPU, queued on its stream. */
int tr_tensor_fill(tr_ctx *ctx, tr_tensor *t, double value);
/* Host <-> tensor copies of raw bytes in the tensor's own dtype, on any device; both have
 * finished with the host buffer when they return (read: the host sees the values). */
int tr_tensor_write(tr_ctx *ctx, tr_tensor *t, const void *host, size_t nbytes);
int tr_tensor_read(tr_ctx *ctx, const tr_tensor *t, void *host, size_t nbytes);
/* Bytes [offset, offset + nbytes) of t into host, on any device (both multiples of the
 * element size); a GPU read has finished when it returns. Lets a writer copy a device
 * tensor down a chunk at a time. */
int tr_tensor_read_range(tr_ctx *ctx, const tr_tensor *t, size_t offset, void *host, size_t nbytes);
/* numel host elements of host_dtype (the pointer may be unaligned, as in a mapped file)
 * into t, converted to t's dtype, on any device: on a GPU in bounded chunks through the
 * pinned staging, so that loading a file to a device needs no second full host copy. */
int tr_tensor_write_converted(tr_ctx *ctx, tr_tensor *t, const void *host, int host_dtype, int64_t numel);

/* Scalar conversions: bf16 with round-to-nearest-even (NaN stays NaN), IEEE binary16
 * with subnormals, infinities and round-to-nearest-even. */
uint16_t tr_f32_to_bf16(float x);
float tr_bf16_to_f32(uint16_t x);
uint16_t tr_f32_to_f16(float x);
float tr_f16_to_f32(uint16_t x);
/* Bulk host conversion between any two dtypes (integers convert by value). */
void tr_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n);
/* tr_convert for buffers of any alignment (a mapped file's tensors may be unaligned): a
 * misaligned side goes through an aligned bounce buffer, a piece at a time. */
void tr_convert_unaligned(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n);

#endif
