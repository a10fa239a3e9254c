/* op_query.h — what the op table (core/ops/op_table.h) tells callers outside core/: which ops
 * exist and whether an op can run on a device, answered without running it (ggml's
 * supports_op). Part of trainer.h, so plain declarations that ffi.cdef accepts. */
#ifndef TR_OP_QUERY_H
#define TR_OP_QUERY_H

#include <stdint.h>

/* 1 when the op named `op` has an implementation built for `device` (TR_CPU or a CUDA
 * ordinal) and that device is present in this process; 0 otherwise, and for an unknown
 * name. */
int tr_op_supported(const char *op, int device);

/* 1 when this build has the CUDA backend compiled in (nvcc was found), whether or not a
 * GPU is present; 0 otherwise. */
int tr_cuda_built(void);

/* 1 when the op named `op` has an implementation compiled for `device`'s backend (TR_CPU:
 * the CPU slot; a CUDA ordinal: the CUDA slot), whether or not that device is present in
 * this process (tr_op_supported also asks that); 0 otherwise, and for an unknown name. */
int tr_op_built(const char *op, int device);

/* The number of ops in the table, and the name of op i (0 <= i < count; NULL outside). */
int tr_op_count(void);
const char *tr_op_name(int i);

/* What a binding needs to call op i without a wrapper of its own (trainer.ops builds its plain
 * ops from these: lua/trainer/core/op_binding.lua). tr_op_arg_info: tensor argument a of op i, in
 * signature order: its name, role (0 read, 1 overwritten, 2 accumulated or updated in place),
 * dtype rule (core/ops/op_table.h's tr_op_dtype_rule) and whether it may be NULL; 0 past the
 * last. tr_op_scalar_info: scalar s, in the C wrapper's order: its name, slot ('f' or 'i': the
 * float and the integer arrays below), index there and default (NAN: required); 0 past the
 * last. tr_op_has_infer: 1 when op i computes its outputs' shapes (tr_op_infer). */
int tr_op_arg_info(int i, int a, const char **name, int *role, int *rule, int *nullable);
int tr_op_scalar_info(int i, int s, const char **name, int *slot, int *index, double *dflt);
int tr_op_has_infer(int i);

/* The shapes and dtypes of op i's outputs for these arguments: t holds the op's tensors in
 * signature order (its outputs NULL), f and ints its scalars (8 floats, 4 integers: the
 * slots above); for each output argument a, ndims[a], shapes[a * 8 ...] and dtypes[a]. A
 * dtype with TR_INFER_CHOOSE added is the default of an output whose dtype the caller may
 * choose (a forward's activation); without it the op needs that dtype (saved statistics,
 * gradients in their incoming gradient's dtype). TR_OK, or TR_EUSER when op i has no infer
 * step or an input it needs is NULL. */
enum { TR_INFER_CHOOSE = 256 };
int tr_op_infer(struct tr_ctx *ctx, int i, struct tr_tensor *const *t, const float *f, const int64_t *ints,
                int64_t *shapes, int *ndims, int *dtypes);

/* Runs op i on these arguments (as tr_op_infer takes them) through the op table's checks
 * and dispatch: what its tr_op_* wrapper does. */
int tr_op_invoke(struct tr_ctx *ctx, int i, struct tr_tensor *const *t, const float *f, const int64_t *ints);

#endif
