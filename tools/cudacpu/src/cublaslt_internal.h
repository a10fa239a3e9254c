/* cublaslt_internal.h (cudacpu) — what the files of the cuBLASLt stand-in share: the contents
 * of its descriptors, the algorithm it encodes into cublasLtMatmulAlgo_t, the problem that the
 * rules (cublaslt_rules.c) check and the products (cublaslt_gemm.c) compute.
 *
 * Invariants: a descriptor is only ever read through these structs (the semi-opaque bytes of
 * cublasLt.h are never touched), and each struct fits in the semi-opaque type it stands for, so
 * the sizes the real header promises stay true. An lt_problem reaches cublaslt_gemm.c only once
 * lt_check_problem accepted it. */
#ifndef CUDACPU_CUBLASLT_INTERNAL_H
#define CUDACPU_CUBLASLT_INTERNAL_H

#include "cublasLt.h"

#include <stdint.h>

/* CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default: the bias has D's type (and the aux matrix,
 * EPILOGUE_AUX_DATA_TYPE's). */
enum { LT_DEFAULT_BIAS_TYPE = -1 };

/* What an epilogue does, by its bits (cublasLt.h's values): adds the bias (BIAS, GELU_BIAS,
 * GELU_AUX_BIAS), applies GELU, stores its input in aux, multiplies by GELU'(aux) (DGELU*), sums
 * D's rows into the bias (DGELU_BGRAD), sums op(B) over k into the bias (BGRADB). 0 for an
 * epilogue the stand-in does not have. */
enum {
    LT_EPI_BIAS = 1,
    LT_EPI_GELU = 2,
    LT_EPI_AUX_OUT = 4,
    LT_EPI_DGELU = 8,
    LT_EPI_BGRAD = 16,
    LT_EPI_KNOWN = 32,
    LT_EPI_BGRADB = 64
};
int lt_epilogue_bits(uint32_t epilogue);

/* Whether CUDACPU_LT_EPILOGUES lets the heuristic offer an algorithm for this epilogue: `all`
 * (the default), `bias` (DEFAULT and BIAS only) or `none` (DEFAULT only). It stands for a card
 * whose cuBLASLt has no kernel for an epilogue at some shape, so that a caller's fallback can be
 * tested. A value outside the set ends the program with status 2. */
int lt_epilogue_offered(uint32_t epilogue);

struct cublasLtContext {
    uint32_t magic; /* LT_HANDLE_MAGIC while live: a destroyed or foreign handle is NOT_INITIALIZED */
};
enum { LT_HANDLE_MAGIC = 0x4c54484eu };

typedef struct {
    int32_t type, order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride, plane_offset;
    uint32_t batch_mode;
} lt_layout;

typedef struct {
    int32_t compute, scale, pointer_mode, transa, transb, transc, fill_mode;
    uint32_t epilogue;
    const void *bias;
    int64_t bias_stride;
    int32_t bias_type;
    void *aux;
    int64_t aux_ld, aux_stride;
    int32_t aux_type;
} lt_desc;

typedef struct {
    uint32_t search_mode;
    uint64_t max_workspace;
    uint32_t align_a, align_b, align_c, align_d;
} lt_pref;

/* What an algorithm of the stand-in is: the problem class it was chosen for and what it needs. */
typedef struct {
    uint32_t magic; /* LT_ALGO_MAGIC: an algo that did not come from the heuristic is refused */
    int32_t compute, scale, atype, ctype, bias_type;
    uint32_t epilogue;
    uint16_t align_a, align_b, align_c, align_d, align_bias, align_aux; /* bytes, each a power of two */
    uint64_t workspace;                                    /* bytes it uses as f32 scratch; 0: none */
} lt_algo;
enum { LT_ALGO_MAGIC = 0x4c54414cu };

/* One checked product D = alpha op(A) op(B) + beta C (+ bias per row of D), column-major. */
typedef struct {
    const lt_desc *op;
    const lt_layout *la, *lb, *lc, *ld;
    int64_t m, n, k, batch;
    int trans_a, trans_b;
    float alpha, beta;
    const void *A, *B, *C, *bias; /* bias: added (LT_EPI_BIAS) or NULL */
    void *D, *aux;                 /* aux: written (LT_EPI_AUX_OUT) or read (LT_EPI_DGELU), else NULL */
    float *bgrad;                  /* LT_EPI_BGRAD: m f32 row sums, zeroed, stored to op->bias at the end */
    float *scratch; /* f32 scratch of lt_scratch_bytes(p) bytes, for 16-bit storage; NULL for f32 */
} lt_problem;

/* cublaslt_rules.c: the documented refusals (each returns the status the real library does). */
cublasStatus_t lt_check_problem(const lt_desc *op, const lt_layout *a, const lt_layout *b, const lt_layout *c,
                                const lt_layout *d, int64_t *m, int64_t *n, int64_t *k);
cublasStatus_t lt_choose_algo(const lt_desc *op, const lt_layout *a, const lt_layout *b, const lt_layout *c,
                              const lt_layout *d, const lt_pref *pref, lt_algo *out);
cublasStatus_t lt_check_run(const lt_algo *algo, const lt_desc *op, const lt_layout *a, const lt_layout *b,
                            const lt_layout *c, const lt_layout *d, const void *A, const void *B, const void *C,
                            const void *D, const void *workspace, size_t workspace_bytes);
int lt_type_size(int32_t type);

/* cublaslt_gemm.c: the products over the CPU BLAS. */
uint64_t lt_scratch_bytes(int32_t ab_type, int64_t m, int64_t n, int64_t k);
void lt_gemm(const lt_problem *p);

#endif
