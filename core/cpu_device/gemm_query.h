/* gemm_query.h — what the CPU GEMM router (cpu_gemm.h) tells callers outside core/: which
 * library runs the CPU matrix products, whether bf16 products run natively, and the packed
 * copies a Linear keeps of its weight. Part of trainer.h, so plain declarations that
 * ffi.cdef accepts. */
#ifndef TR_GEMM_QUERY_H
#define TR_GEMM_QUERY_H

#include <stdint.h>

/* The library that runs the CPU matrix products in this process: "onednn" or "openblas"
 * (core/cpu_device/cpu_gemm.h; TRAINER_CPU_GEMM chooses); NULL with ctx's error set when
 * TRAINER_CPU_GEMM names something this build or machine cannot run. */
struct tr_ctx;
const char *tr_cpu_gemm_library(struct tr_ctx *ctx);

/* 1 when this process runs a Linear's bf16 x bf16 products natively in bf16 (oneDNN on the
 * CPU's bf16 instructions where they beat f32: AMX, or AVX512-BF16 on AMD; core/cpu_device/cpu_gemm.c),
 * 0 when it widens them to f32 (OpenBLAS, other CPUs, or a TRAINER_CPU_GEMM it cannot run). */
int tr_cpu_gemm_bf16_native(struct tr_ctx *ctx);

/* The widest vector ISA this binary may run: "cpu" (whatever the CPU has, a normal build) or
 * "avx2" (an ISA_MAX=avx2 build for measurements, core/base/isa_max.h). */
const char *tr_cpu_isa_max(void);

/* The packed copies this process's CPU Linear keeps of an f32 weight [out_features, in_features] (cpu_gemm.h's
 * tr_cpu_weight_packed; `trainer plan` counts them as workspace): bytes[0] the forward's,
 * bytes[1] the input gradient's, each the size the CPU allocator is asked for (before its
 * block rounding); 0 for a product that takes no copy of its own (OpenBLAS, a side under
 * 32, or oneDNN's packed layout is the weight as stored: the input gradient's on AVX2).
 * TR_OK, or an error code with ctx's error set (out_features or in_features not in 1..INT_MAX, TRAINER_CPU_GEMM
 * unusable, a oneDNN failure). Half weights are never packed: this is for f32 ones. */
int tr_cpu_linear_pack_bytes(struct tr_ctx *ctx, int64_t out_features, int64_t in_features, int64_t bytes[2]);

/* on = 1: each packed copy of the f32 CPU weight w is made for one product and freed as that
 * product returns (any pack it holds now is freed), instead of kept until w is next written.
 * For a weight the optimizer writes after each use, whose pack could never be used twice: its
 * packs then never sit beside the activations (a full fine-tune keeps no forward packs at the
 * end of its forward). on = 0 keeps them again. A no-op for any other tensor. TR_OK, or
 * TR_EOOM with ctx's error set. */
struct tr_tensor;
int tr_cpu_weight_transient_packs(struct tr_ctx *ctx, const struct tr_tensor *w, int on);

#endif
