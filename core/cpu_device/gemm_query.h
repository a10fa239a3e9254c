/* gemm_query.h — what the CPU GEMM router (cpu_gemm.h) tells callers outside core/: which
 * library runs the CPU matrix products and whether bf16 products run natively. Part of
 * trainer.h, so plain declarations that ffi.cdef accepts. */
#ifndef TR_GEMM_QUERY_H
#define TR_GEMM_QUERY_H

/* The library that runs the CPU matrix products in this process: "onednn" or "openblas"
 * (core/cpu_device/cpu_gemm.h; TRAINER_CPU_GEMM chooses); NULL with ctx's error set when
 * TRAINER_CPU_GEMM names something this build or machine cannot run. */
struct tr_ctx;
const char *tr_cpu_gemm_library(struct tr_ctx *ctx);

/* 1 when this process runs a Linear's bf16 x bf16 products natively in bf16 (oneDNN on the
 * CPU's bf16 instructions where they beat f32: AMX, or AVX512-BF16 on AMD; core/cpu_device/cpu_gemm.c),
 * 0 when it widens them to f32 (OpenBLAS, other CPUs, or a TRAINER_CPU_GEMM it cannot run). */
int tr_cpu_gemm_bf16_native(struct tr_ctx *ctx);

#endif
