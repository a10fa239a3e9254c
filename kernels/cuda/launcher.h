/* launcher.h — the contract of every host launcher of kernels/cuda/ (one header per kernel
 * family, NAME.h beside NAME.cu, as kernels/cpu/NAME.h beside NAME.c), and the C-linkage
 * include of tr_base.h they share. Launchers have C linkage and no CUDA types (streams,
 * handles and device pointers travel as void *), so that plain C (core/, the tests) calls
 * them.
 *
 * Contract (the same gradient rules as the CPU kernels):
 *   - asynchronous on `stream` (a cudaStream_t); the caller made the stream's device current
 *     (tr_cuda_set_current in core/cuda_device/cuda_device.h);
 *   - pointers are device pointers; n counts elements; n == 0 does nothing; an output may be
 *     the same pointer as an input, never a partial overlap;
 *   - every float buffer comes with its own dtype (`*_dt`: TR_F32, TR_BF16, TR_F16), as on
 *     the CPU each activation may differ; arithmetic and every reduction run in fp32 and
 *     round once to the output's dtype with round-to-nearest-even (bit-identical to the
 *     CPU's tr_f32_to_bf16 / tr_f32_to_f16 and to fp32 C arithmetic without contraction);
 *   - saved statistics (layernorm mean/rstd, attention and cross-entropy lse) and parameter
 *     gradients are f32; a gradient marked (+=) ACCUMULATES, (=) OVERWRITES, and a NULL
 *     gradient is skipped (a frozen parameter);
 *   - reductions are deterministic: a fixed tree per launch shape, never atomics on floats,
 *     so a run repeats bit for bit;
 *   - returns TR_OK, TR_EUSER (bad dtype, size or pointer: nothing launched) or TR_EINTERNAL
 *     (a launch failure or CUDA error, naming the op, message in err). Errors of a kernel's
 *     execution surface at the next synchronising call;
 *   - names: tr_k_<op>_<fwd|bwd>_cuda, as the CPU kernels' tr_k_<op>_<fwd|bwd>_<dtype>; the
 *     dtype is an argument here, so the suffix names the backend.
 * Sizes are int64 elements; N rows of C columns means row-major [N, C]. */
#ifndef TR_KERNELS_CUDA_LAUNCHER_H
#define TR_KERNELS_CUDA_LAUNCHER_H

/* C linkage for the declarations between them, in C and C++ (the .cu files) alike. */
#ifdef __cplusplus
#define TR_K_BEGIN_DECLS extern "C" {
#define TR_K_END_DECLS }
#else
#define TR_K_BEGIN_DECLS
#define TR_K_END_DECLS
#endif

/* tr_base.h has no C++ guards of its own; its functions have C linkage. */
TR_K_BEGIN_DECLS
#include "tr_base.h"
TR_K_END_DECLS

#endif
