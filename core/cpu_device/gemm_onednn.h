/* gemm_onednn.h — f32 matrix products on the CPU through oneDNN's matmul primitive, with
 * an optional right-hand matrix (a Linear's weight) packed once into oneDNN's own blocked
 * layout: the packed products beat OpenBLAS's sgemm on the MiniLM Linear shapes (the figures:
 * docs/BENCHMARKS.md, "Figures behind choices in the code"; bench/bench_gemm_onednn.c).
 *
 * libdnnl is loaded at run time (dlopen of the soname this build's headers describe), as
 * the CUDA backend loads cuBLASLt: a build with the headers runs, on OpenBLAS, on a machine
 * without the library (the GPU bundle does not carry its 40 MB), and a process that never
 * runs a CPU GEMM on oneDNN never maps it.
 *
 * The layouts are those of matmul.h: row-major, op(A) is M x K, op(B) is K x N, C is M x N.
 * A handle keeps one primitive per product shape (a bounded cache, least recently used
 * first out) and one reorder per packed layout; it is not thread-safe (ops run one at a
 * time) and the primitives run on the OpenMP threads the rest of the runtime uses
 * (Debian's libdnnl is built on libgomp). Every oneDNN call's status is checked: a
 * failure is TR_EINTERNAL (TR_EOOM when oneDNN ran out of memory) naming the call, the
 * shape, and the switch back to OpenBLAS. */
#ifndef TR_GEMM_ONEDNN_H
#define TR_GEMM_ONEDNN_H

#include <stddef.h>
#include <stdint.h>
#include "tr_base.h"

typedef struct tr_onednn tr_onednn;

/* 1 when this build was compiled against oneDNN's (2.x) headers. */
int tr_onednn_built(void);

/* Loads libdnnl and makes a CPU engine and stream. On failure *out = NULL, TR_EUSER and
 * err says why (not built in, library missing, engine refused). */
int tr_onednn_open(tr_onednn **out, tr_error *err);
void tr_onednn_close(tr_onednn *d);

/* Bytes of B (K x N; transB: stored as N x K row-major) in the packed layout. */
int tr_onednn_pack_bytes(tr_onednn *d, int N, int K, int transB, size_t *bytes, tr_error *err);
/* Whether the packed layout is unblocked (oneDNN's AVX2 sgemm packs B inside each call
 * and takes plain row-major B as its "packed" layout): *plain = 1 when it is B as stored
 * (transB 0: a pack would be a copy), 2 when it is B transposed (transB 1: a pack would only
 * transpose), 0 when it is blocked (AVX-512 and AMX kernels: the pack pays). */
int tr_onednn_pack_plain(tr_onednn *d, int N, int K, int transB, int *plain, tr_error *err);
/* dst (pack_bytes bytes, 64-byte aligned) = B in the packed layout. */
int tr_onednn_pack(tr_onednn *d, void *dst, const float *B, int N, int K, int transB, tr_error *err);

/* C = alpha * op(A) op(B) + beta * C + bias (bias[N] per row, NULL = none); beta == 0
 * never reads C. B is plain (transB as above) or, with b_packed, tr_onednn_pack's bytes
 * for the same N, K and transB. M, N, K > 0; bias only with alpha == 1. C OVERWRITES
 * (accumulates when beta == 1). */
int tr_onednn_gemm(tr_onednn *d, float *C, const float *A, const void *B, int b_packed, const float *bias,
                   int M, int N, int K, int transA, int transB, float alpha, float beta, tr_error *err);

/* The same product over bf16 A and B (bf16 bits, uint16_t) with f32 accumulation inside
 * oneDNN, into C of bf16 (c_bf16, rounded to nearest even once, after the bias and the
 * sum) or f32; bias f32. B is plain (no packed bf16 layout: a pack would be a second copy
 * of a frozen half weight, and plain bf16 products run about as fast as packed ones on an
 * AMD EPYC with AVX512-BF16: docs/BENCHMARKS.md).
 * Only where tr_onednn_bf16_isa names bf16 instructions: elsewhere oneDNN may run it on
 * reference code. */
int tr_onednn_gemm_bf16(tr_onednn *d, void *C, int c_bf16, const uint16_t *A, const uint16_t *B, const float *bias,
                        int M, int N, int K, int transA, int transB, float alpha, float beta, tr_error *err);

/* The bf16 instructions oneDNN runs bf16 products on here: AMX tiles, AVX512-BF16 dot
 * products, or none (it would convert, or run reference code); asked once, then
 * remembered. Whether that beats f32 depends on the CPU too (cpu_gemm.c decides). */
enum { TR_ONEDNN_BF16_NONE = 0, TR_ONEDNN_BF16_AVX512 = 1, TR_ONEDNN_BF16_AMX = 2 };
int tr_onednn_bf16_isa(tr_onednn *d);

/* The implementation oneDNN chose for that product ("brg:avx512_core", ...), for the
 * benchmark; NULL on failure. */
const char *tr_onednn_impl(tr_onednn *d, int M, int N, int K, int transA, int transB, int b_packed, tr_error *err);

#endif
