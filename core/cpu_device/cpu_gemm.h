/* cpu_gemm.h — which library runs a CPU matrix product, and Linear weights packed for it.
 * Internal to core/ (not part of trainer.h; what the router tells outside callers is in
 * gemm_query.h).
 *
 * The library: oneDNN (gemm_onednn.h) when this build has its headers and the
 * machine its library, else OpenBLAS (kernels/cpu/matmul.h). The environment variable
 * TRAINER_CPU_GEMM=openblas|onednn forces one (onednn where it is missing is an error);
 * it is read once, when the context first runs a product. Each product goes where it was
 * measured faster on this project's machine (bench/bench_gemm_onednn.c): see
 * route_onednn() in cpu_gemm.c.
 *
 * Packed weights: the two products of a Linear that read its weight W [O, I] — the forward
 * X W^T and the input gradient dY W — run on copies of W in oneDNN's packed layout, made
 * by tr_cpu_weight_packed and kept beside W's storage (tensor_version.h) with the version
 * of W they were made from: a frozen weight is packed once, a trained one again after each
 * optimizer step (every write of W moves its version), its other product's pack, stale by
 * then, freed as the first product repacks; a weight marked transient
 * (tr_cpu_weight_transient_packs) has each pack freed as its product returns. Where that
 * layout is W as stored (the input gradient's on AVX2) the product reads W itself: no copy. Only f32 weights are
 * packed: a half-precision weight runs its products unpacked (its packs would be f32, four
 * times its bytes, for no speed measured; see cpu_gemm.c). The copies are CPU allocator
 * blocks of tag `workspace`, freed with the weight; `trainer plan` counts them
 * (lua/trainer/plan, through tr_cpu_linear_pack_bytes in gemm_query.h).
 *
 * bf16 products: where oneDNN runs them on the CPU's bf16 instructions
 * (tr_cpu_gemm_bf16_native), matmul.c hands a Linear's bf16 operands to tr_cpu_gemm_bf16
 * as they are; elsewhere they are staged to f32 in blocks of rows. */
#ifndef TR_CPU_GEMM_H
#define TR_CPU_GEMM_H

#include "gemm_query.h"
#include "tensor.h"

typedef struct tr_cpu_gemm tr_cpu_gemm;

/* The router is the host backend's private state in a context (host_context_backend.c): made by
 * tr_cpu_gemm_create on first use, freed with the context. Creation fails (TR_EUSER, *out NULL) only when TRAINER_CPU_GEMM asks for
 * something that cannot be had: an unknown name, or onednn without oneDNN. */
int tr_cpu_gemm_create(tr_cpu_gemm **out, tr_error *err);
void tr_cpu_gemm_free(tr_cpu_gemm *g);   /* NULL is a no-op */

/* The router of ctx: the private state of the registered host backend
 * (host_context_backend.c), made on first use; NULL with ctx's error set when
 * tr_cpu_gemm_create fails. */
tr_cpu_gemm *tr_ctx_cpu_gemm(tr_ctx *ctx);

/* Which of W's products a pack is for. */
enum { TR_PACK_FORWARD = 0, TR_PACK_INPUT_GRAD = 1 };

/* *packed = W (2-D [O, I], CPU, any float dtype) packed for `product`, current with W's
 * bytes; NULL when that product does not run on a packed weight (OpenBLAS, or a shape
 * routed to it). Where oneDNN's packed layout is W as stored (the input gradient's on
 * AVX2), W's own data. The pointer is valid until W is next written or freed, or, once W
 * was written, the other product's pack is asked for. */
int tr_cpu_weight_packed(tr_ctx *ctx, const tr_tensor *w, int product, const void **packed);
/* Called as a product that took tr_cpu_weight_packed(w, product) returns: frees that pack
 * when w's packs are transient (tr_cpu_weight_transient_packs in gemm_query.h). */
void tr_cpu_weight_pack_done(const tr_tensor *w, int product);

/* Y[rows, O] = X[rows, I] W^T + bias, with W packed for TR_PACK_FORWARD. */
int tr_cpu_linear_forward_packed(tr_ctx *ctx, float *Y, const float *X, const void *packed, const float *bias,
                                 int rows, int O, int I);
/* dX[rows, I] = dY[rows, O] W + beta dX, with W packed for TR_PACK_INPUT_GRAD (beta 0 never
 * reads dX; 1 accumulates the input gradient in the product). */
int tr_cpu_linear_input_grad_packed(tr_ctx *ctx, float *dX, const float *dY, const void *packed, int rows, int O,
                                    int I, float beta);

/* tr_k_matmul_fwd_f32's contract (one matrix, no batch), on the library route() picks. */
/* Whether tr_cpu_gemm_f32 runs a plain M x N x K product (no bias) on oneDNN here (the
 * router's rule; for tests). */
int tr_cpu_gemm_routes_onednn(tr_ctx *ctx, int M, int N, int K);

int tr_cpu_gemm_f32(tr_ctx *ctx, float *C, const float *A, const float *B, const float *bias, int M, int N, int K,
                    int transA, int transB, float alpha, float beta);

/* C (c_dtype TR_BF16 or TR_F32) = alpha * op(A) op(B) + beta * C + bias, A and B bf16 with
 * f32 accumulation, bias f32 or NULL (alpha 1 with a bias); tr_cpu_gemm_f32's layouts. Only
 * where tr_cpu_gemm_bf16_native (gemm_query.h) is 1: oneDNN on the CPU's bf16 instructions
 * where they beat f32 (AMX; AVX512-BF16 on AMD, twice the f32 rate there). Elsewhere
 * (OpenBLAS, Intel's AVX512-BF16 without AMX, no bf16 instructions) half operands are
 * staged to f32. */
int tr_cpu_gemm_bf16(tr_ctx *ctx, void *C, int c_dtype, const void *A, const void *B, const float *bias, int M,
                     int N, int K, int transA, int transB, float alpha, float beta);

#endif
