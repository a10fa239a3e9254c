/* op_query.h — what the op table (core/ops/op_table.h) tells callers outside core/: which ops
 * exist and whether an op can run on a device, answered without running it (ggml's
 * supports_op). Part of trainer.h, so plain declarations that ffi.cdef accepts. */
#ifndef TR_OP_QUERY_H
#define TR_OP_QUERY_H

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

#endif
