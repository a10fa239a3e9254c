/* cuda_ops.h — the CUDA kernels' host-side launchers, with C linkage and no CUDA types
 * (streams, handles and device pointers travel as void *), so that plain C (core/, the
 * tests) calls them. Implemented in kernels/cuda/gemm.cu and kernels/cuda/elementwise.cu.
 *
 * Common contract:
 *   - every launcher is asynchronous on `stream` (a cudaStream_t) and the caller has made
 *     the stream's device current (tr_cuda_set_current in core/device/cuda_device.h);
 *   - pointers are device pointers; n counts elements; n == 0 does nothing;
 *   - float dtypes are TR_F32, TR_BF16, TR_F16; arithmetic runs in fp32 and rounds once
 *     to the output dtype with round-to-nearest-even (bit-identical to the CPU's
 *     tr_f32_to_bf16 / tr_f32_to_f16 and to fp32 C arithmetic without contraction);
 *   - an output may be the same pointer as an input, never a partial overlap;
 *   - returns TR_OK, TR_EUSER (bad dtype, size or pointer: nothing launched) or
 *     TR_EINTERNAL (a CUDA error, message in err). Launch errors are checked at once;
 *     errors of the kernel's execution surface at the next synchronising call.
 *   - names: tr_k_<op>_<fwd|bwd>_cuda, as the CPU kernels' tr_k_<op>_<fwd|bwd>_<dtype>;
 *     the dtype is an argument here, so the suffix names the backend. */
#ifndef TR_CUDA_OPS_H
#define TR_CUDA_OPS_H

/* tr_base.h has no C++ guards of its own; its functions have C linkage. */
#ifdef __cplusplus
extern "C" {
#endif
#include "tr_base.h"
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ GEMM (cuBLASLt) */

/* What a GEMM needs from the device: owned by the device state (core/device/cuda_device.c),
 * which hands out a pointer to it (tr_cuda_blas_env). */
typedef struct tr_cuda_blas {
    void *lt;                  /* cublasLtHandle_t; NULL until cuBLASLt is loaded (lazily) */
    const void *api;           /* the tr_cublaslt_api (cublaslt_api.h) it was loaded into */
    const char *unavailable;   /* why cuBLASLt could not be loaded (a whole message), or NULL */
    void *stream;              /* cudaStream_t every matmul runs on */
    void *workspace;           /* device memory cuBLASLt may use */
    uint64_t workspace_bytes;
    void *cache;               /* tr_cuda_gemm_cache_new's plans, or NULL: no caching */
} tr_cuda_blas;

/* Row-major, per batch item b < batch:
 *   C_b[m,n] = alpha * op(A_b)[m,k] @ op(B_b)[k,n] + beta * C_b + bias[n]
 * op(X) = X (stored as written) or X^T (trans_x = 1: A stored [k,m], B stored [n,k]).
 * X_b = X + b * stride_x elements (stride 0 broadcasts one matrix over the batch).
 * bias (NULL for none) has n elements of c_dtype, shared by every batch item and added
 * after alpha and beta. beta == 0 never reads C (it may hold NaN).
 * Dtype pairs (ab_dtype -> c_dtype): f32 -> f32 (tf32 = 1 lets the tensor cores round
 * inputs to tf32), bf16 -> bf16 or f32, f16 -> f16 or f32; accumulation is fp32. */
typedef struct tr_cuda_gemm_desc {
    int64_t m, n, k;
    int64_t batch;             /* >= 1 */
    int64_t stride_a, stride_b, stride_c;   /* elements; used when batch > 1 */
    int32_t trans_a, trans_b;  /* 0 or 1 */
    int32_t ab_dtype, c_dtype; /* tr_dtype */
    int32_t tf32;              /* f32 only: allow TF32 tensor-core math */
    float alpha, beta;
} tr_cuda_gemm_desc;

/* c = the formula above. Gradients: this is a plain product; for a Linear layer's
 * backward the caller passes beta = 1 to ACCUMULATE into dW, beta = 0 to OVERWRITE dX. */
int tr_k_matmul_fwd_cuda(const tr_cuda_blas *env, void *c, const void *a, const void *b, const void *bias,
                 const tr_cuda_gemm_desc *desc, tr_error *err);

/* The cache of matmul plans (descriptors, layouts and the chosen algorithm) keyed by
 * shape, dtypes, transposes, strides, epilogue and pointer alignment. Host memory only;
 * not thread-safe: one cache per device state, used from one thread at a time. */
int tr_cuda_gemm_cache_new(void **out_cache, tr_error *err);
void tr_cuda_gemm_cache_free(void *cache);
/* Plans served from the cache / built, since creation. */
void tr_cuda_gemm_cache_counts(const void *cache, uint64_t *hits, uint64_t *misses);

/* ------------------------------------------------------------ elementwise */
/* Every output below is OVERWRITTEN (=), except axpy's y, which ACCUMULATES (+=). */

/* out = a + b (all of dtype) */
int tr_k_add_fwd_cuda(void *out, const void *a, const void *b, int dtype, int64_t n, void *stream,
                tr_error *err);
/* out = a * b */
int tr_k_mul_fwd_cuda(void *out, const void *a, const void *b, int dtype, int64_t n, void *stream,
                tr_error *err);
/* out = alpha * x */
int tr_k_scale_fwd_cuda(void *out, const void *x, float alpha, int dtype, int64_t n, void *stream,
                  tr_error *err);
/* y += alpha * x (y ACCUMULATES; computed as round(y + round(alpha * x)), no FMA) */
int tr_k_axpy_fwd_cuda(void *y, const void *x, float alpha, int dtype, int64_t n, void *stream,
                 tr_error *err);
/* out[i] = value rounded to dtype */
int tr_k_fill_fwd_cuda(void *out, float value, int dtype, int64_t n, void *stream, tr_error *err);
/* out = in converted from in_dtype to out_dtype (any pair of f32, bf16, f16; the same
 * dtype is a copy). One rounding, RNE; NaN stays NaN, overflow gives inf. */
int tr_k_cast_fwd_cuda(void *out, int out_dtype, const void *in, int in_dtype, int64_t n, void *stream,
                 tr_error *err);

#ifdef __cplusplus
}
#endif

#endif
