/* matmul.h — matrix products through cuBLASLt (matmul.cu), the device twin of kernels/cpu/matmul.h,
 * and the cache of their plans; host launchers with C linkage and no CUDA types, under
 * launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_MATMUL_H
#define TR_KERNELS_CUDA_MATMUL_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* What a GEMM needs from the device: owned by the device state (core/cuda_device/cuda_device.c),
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

/* The epilogue of a product (tr_cuda_gemm_desc.epilogue), in the row-major terms below; the
 * GELU ones are cuBLASLt's tanh approximation of GELU, and with an aux matrix batch must be 1.
 *   NONE      C = product (+ bias[n] when bias is given: cuBLASLt's BIAS)
 *   BGRAD_A   C = product; bias (written, m elements of c_dtype) = op(A)'s sums over k, the
 *             bias gradient when A is a layer's output gradient (BGRADB); batch 1
 *   GELU_AUX  aux = product (+ bias[n]), C = gelu_tanh(aux) (GELU_AUX[_BIAS])
 *   DGELU     C = product * gelu_tanh'(aux); when bias is given it is written: n elements of
 *             c_dtype, C's column sums (DGELU[_BGRAD]); batch 1
 * aux is [m, n] of c_dtype with row stride aux_ld (a multiple of 8, >= n). A card's cuBLASLt
 * may have no kernel for an epilogue at some shape: the call then fails (TR_EINTERNAL) having
 * written nothing, and the caller computes the epilogue itself. */
enum { TR_GEMM_EPI_NONE = 0, TR_GEMM_EPI_BGRAD_A = 1, TR_GEMM_EPI_GELU_AUX = 2, TR_GEMM_EPI_DGELU = 3 };

/* Row-major, per batch item b < batch:
 *   C_b[m,n] = alpha * op(A_b)[m,k] @ op(B_b)[k,n] + beta * C_b + bias[n]  (the epilogue NONE)
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
    int32_t epilogue;          /* TR_GEMM_EPI_*; 0 (NONE) by default */
    void *aux;                 /* GELU_AUX (written), DGELU (read); else unused */
    int64_t aux_ld;            /* elements between aux's rows */
} tr_cuda_gemm_desc;

/* c = the formula above with d->epilogue. Gradients: this is a plain product; for a Linear layer's
 * backward the caller passes beta = 1 to ACCUMULATE into dW, beta = 0 to OVERWRITE dX. */
int tr_k_matmul_fwd_cuda(const tr_cuda_blas *env, void *c, const void *a, const void *b, const void *bias,
                 const tr_cuda_gemm_desc *desc, tr_error *err);

/* The cache of matmul plans (descriptors, layouts and the chosen algorithm) keyed by
 * shape, dtypes, transposes, strides, epilogue (with the bias's and aux's presence, dtype,
 * leading dimension and alignment) and pointer alignment. Host memory only;
 * not thread-safe: one cache per device state, used from one thread at a time. */
int tr_cuda_gemm_cache_new(void **out_cache, tr_error *err);
void tr_cuda_gemm_cache_free(void *cache);
/* Plans served from the cache / built, since creation. */
void tr_cuda_gemm_cache_counts(const void *cache, uint64_t *hits, uint64_t *misses);

TR_K_END_DECLS

#endif
