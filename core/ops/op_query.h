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

/* The library that runs the CPU matrix products in this process: "onednn" or "openblas"
 * (core/ops/cpu_gemm.h; TRAINER_CPU_GEMM chooses); NULL with ctx's error set when
 * TRAINER_CPU_GEMM names something this build or machine cannot run. */
struct tr_ctx;
const char *tr_cpu_gemm_library(struct tr_ctx *ctx);

/* 1 when this process runs a Linear's bf16 x bf16 products natively in bf16 (oneDNN on the
 * CPU's bf16 instructions where they beat f32: AMX, or AVX512-BF16 on AMD; core/ops/cpu_gemm.c),
 * 0 when it widens them to f32 (OpenBLAS, other CPUs, or a TRAINER_CPU_GEMM it cannot run). */
int tr_cpu_gemm_bf16_native(struct tr_ctx *ctx);

/* The number of ops in the table, and the name of op i (0 <= i < count; NULL outside). */
int tr_op_count(void);
const char *tr_op_name(int i);

#endif
