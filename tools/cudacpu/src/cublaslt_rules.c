/* cublaslt_rules.c (cudacpu) — what the cuBLASLt stand-in refuses, and with which status, so that
 * it is never more lenient than the real library: the problem checks shared by the heuristic and
 * cublasLtMatmul, the choice of an algorithm (its alignment and workspace needs) and the checks
 * of one run against the algorithm it was given.
 *
 * Every refusal cites the documented rule beside it. "header" is CUDA 13's cublasLt.h (its
 * comments are the reference documentation of each attribute); "guide" is the cuBLAS guide at
 * docs.nvidia.com/cuda/cublas, section cublasLtMatmul(). Where the documentation names no status,
 * the status follows cublasLtMatmul's own list (header): INVALID_VALUE "if parameters are in
 * conflict or in an impossible configuration", NOT_SUPPORTED "if current implementation on
 * selected device doesn't support configured operation".
 *
 * The stand-in also refuses, with NOT_SUPPORTED, combinations the real library supports but the
 * stand-in does not compute (8-bit, 16F and 64F compute, complex, row order, ...): stricter, never
 * more lenient. */
#include "cublaslt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lt_type_size(int32_t type)
{
    switch (type) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
    }
}

static int is_16bit(int32_t type) { return type == CUDA_R_16F || type == CUDA_R_16BF; }

int lt_epilogue_bits(uint32_t epilogue)
{
    switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: return LT_EPI_KNOWN;
    case CUBLASLT_EPILOGUE_BIAS: return LT_EPI_KNOWN | LT_EPI_BIAS;
    case CUBLASLT_EPILOGUE_GELU: return LT_EPI_KNOWN | LT_EPI_GELU;
    case CUBLASLT_EPILOGUE_GELU_BIAS: return LT_EPI_KNOWN | LT_EPI_GELU | LT_EPI_BIAS;
    case CUBLASLT_EPILOGUE_GELU_AUX: return LT_EPI_KNOWN | LT_EPI_GELU | LT_EPI_AUX_OUT;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return LT_EPI_KNOWN | LT_EPI_GELU | LT_EPI_AUX_OUT | LT_EPI_BIAS;
    case CUBLASLT_EPILOGUE_DGELU: return LT_EPI_KNOWN | LT_EPI_DGELU;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return LT_EPI_KNOWN | LT_EPI_DGELU | LT_EPI_BGRAD;
    case CUBLASLT_EPILOGUE_BGRADB: return LT_EPI_KNOWN | LT_EPI_BGRADB;
    default: return 0;
    }
}

int lt_epilogue_offered(uint32_t epilogue)
{
    static int level = -1; /* 2 all, 1 bias, 0 none */
    if (level < 0) {
        const char *s = getenv("CUDACPU_LT_EPILOGUES");
        if (!s || !strcmp(s, "all")) level = 2;
        else if (!strcmp(s, "bias")) level = 1;
        else if (!strcmp(s, "none")) level = 0;
        else {
            fprintf(stderr, "cudacpu: CUDACPU_LT_EPILOGUES=%s is not valid (accepted: all, bias, none)\n", s);
            exit(2);
        }
    }
    if (epilogue == CUBLASLT_EPILOGUE_DEFAULT) return 1;
    if (epilogue == CUBLASLT_EPILOGUE_BIAS) return level >= 1;
    return level >= 2;
}

/* The epilogue reads or writes the bias vector / the aux matrix. */
static int uses_bias(int bits) { return (bits & (LT_EPI_BIAS | LT_EPI_BGRAD | LT_EPI_BGRADB)) != 0; }
static int uses_aux(int bits) { return (bits & (LT_EPI_AUX_OUT | LT_EPI_DGELU)) != 0; }

/* The largest power of two, at most cap, dividing x (cap itself for x == 0). */
static uint64_t pow2_dividing(uint64_t x, uint64_t cap)
{
    uint64_t bits = x | cap;
    return bits & (~bits + 1);
}

/* The largest power of two not above x (0 for x == 0). */
static uint64_t pow2_floor(uint64_t x)
{
    uint64_t r = 0;
    for (uint64_t b = 1; b && b <= x; b <<= 1) r = b;
    return r;
}

/* ------------------------------------------------------------ the problem */

/* The supported type combinations (guide, cublasLtMatmul(), table of datatypes supported), for the
 * rows this stand-in computes: COMPUTE_32F[_PEDANTIC] with scale 32F over A = B in {16BF, 16F,
 * 32F} and C = D of A's type or 32F (32F A only with 32F C); the FAST_16F/16BF/TF32 computes with
 * everything 32F. Outside the table cuBLASLt has no algorithm: NOT_SUPPORTED. */
static int types_supported(const lt_desc *op, int32_t at, int32_t bt, int32_t ct, int32_t dt)
{
    if (op->scale != CUDA_R_32F || at != bt || ct != dt) return 0;
    switch (op->compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC: return (is_16bit(at) && (ct == at || ct == CUDA_R_32F)) || (at == CUDA_R_32F && ct == CUDA_R_32F);
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32: return at == CUDA_R_32F && ct == CUDA_R_32F;
    default: return 0;
    }
}

/* The emulated card's compute capability (CUDACPU_ARCH, as the runtime reads it: 90 when unset;
 * the runtime has already refused a value outside its set at start). */
static int device_arch(void)
{
    const char *s = getenv("CUDACPU_ARCH");
    return s && *s ? atoi(s) : 90;
}

/* bf16 products need an sm_80 card: on an older one cuBLASLt has no algorithm for them. */
static int arch_has_type(int32_t type) { return type != CUDA_R_16BF || device_arch() >= 80; }

/* A layout the stand-in can read: column order, strided batches, real types, int32 sizes. */
static cublasStatus_t check_layout(const lt_layout *l)
{
    /* header, ORDER: "default: CUBLASLT_ORDER_COL"; the other orders are not computed here. */
    if (l->order != CUBLASLT_ORDER_COL || l->plane_offset != 0 || l->batch_mode != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!lt_type_size(l->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* header, LD: "Currently only non-negative values are supported, must be large enough so that
     * matrix memory locations are not overlapping (e.g. greater or equal to
     * CUBLASLT_MATRIX_LAYOUT_ROWS in case of CUBLASLT_ORDER_COL)". */
    if (l->ld < 0 || (uint64_t)l->ld < l->rows) return CUBLAS_STATUS_INVALID_VALUE;
    /* header, BATCH_COUNT: int32_t, "Number of matmul operations to perform in the batch". */
    if (l->batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
    /* header, ROWS/COLS: "Usually only values that can be expressed as int32_t are supported";
     * the CPU BLAS also takes the leading dimension as an int. */
    if (l->rows > INT32_MAX || l->cols > INT32_MAX || l->ld > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t lt_check_problem(const lt_desc *op, const lt_layout *a, const lt_layout *b, const lt_layout *c,
                                const lt_layout *d, int64_t *m, int64_t *n, int64_t *k)
{
    if (!op || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st;
    const lt_layout *all[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if ((st = check_layout(all[i])) != CUBLAS_STATUS_SUCCESS) return st;

    if (!types_supported(op, a->type, b->type, c->type, d->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!arch_has_type(a->type) || !arch_has_type(c->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* header, TRANSA/TRANSB: a cublasOperation_t (CUBLAS_OP_C is CUBLAS_OP_T for real types). */
    if ((unsigned)op->transa > CUBLAS_OP_C || (unsigned)op->transb > CUBLAS_OP_C) return CUBLAS_STATUS_INVALID_VALUE;
    /* header, TRANSC: "Currently only CUBLAS_OP_N is supported." */
    if (op->transc != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* Not modelled by the stand-in (the real library has them): a non-full fill mode, alpha/beta
     * vectors. Host and device scalars read alike here (device memory is host memory). */
    if (op->fill_mode != CUBLAS_FILL_MODE_FULL) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (op->pointer_mode != CUBLASLT_POINTER_MODE_HOST && op->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    /* The epilogues the stand-in computes: DEFAULT, BIAS and the GELU family (ReLU, BGRADA/B
     * are not modelled). */
    const int epi = lt_epilogue_bits(op->epilogue);
    if (!epi) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* header, BIAS_DATA_TYPE: "Bias vector elements are the same type as the elements of output
     * matrix (Dtype)" (the exceptions are IMMA and fp8 kernels); default -1 means D's type. */
    if (uses_bias(epi) && op->bias_type != LT_DEFAULT_BIAS_TYPE && op->bias_type != d->type)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (uses_aux(epi)) {
        /* header, EPILOGUE_AUX_LD: the GELU input matrix's leading dimension "Must be divisible by
         * 8 and be no less than the number of rows in the output matrix"; AUX_BATCH_STRIDE: "Must
         * be divisible by 8". */
        if (op->aux_ld < (int64_t)d->rows || op->aux_ld % 8) return CUBLAS_STATUS_INVALID_VALUE;
        if (d->batch > 1 && op->aux_stride % 8) return CUBLAS_STATUS_INVALID_VALUE;
        /* header, EPILOGUE_AUX_DATA_TYPE: other aux types than D's are for fp8 kernels; -1 is D's. */
        if (op->aux_type != LT_DEFAULT_BIAS_TYPE && op->aux_type != d->type) return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    /* The bias gradient of a batched product (per batch with BIAS_BATCH_STRIDE) is not modelled. */
    if ((epi & (LT_EPI_BGRAD | LT_EPI_BGRADB)) && d->batch > 1) return CUBLAS_STATUS_NOT_SUPPORTED;

    /* D = alpha op(A) op(B) + beta C: the shapes must chain (header, cublasLtMatmul: an
     * "impossible configuration" is INVALID_VALUE). */
    const int ta = op->transa != CUBLAS_OP_N, tb = op->transb != CUBLAS_OP_N;
    const uint64_t am = ta ? a->cols : a->rows, ak = ta ? a->rows : a->cols;
    const uint64_t bk = tb ? b->cols : b->rows, bn = tb ? b->rows : b->cols;
    if (am != d->rows || bn != d->cols || ak != bk) return CUBLAS_STATUS_INVALID_VALUE;
    /* guide, cublasLtMatmul(): out of place, "both matrices [C and D] must have the same data
     * type, number of rows, number of columns, batch size, and memory order". */
    if (c->rows != d->rows || c->cols != d->cols || c->batch != d->batch) return CUBLAS_STATUS_INVALID_VALUE;
    /* One batch count for the whole product: A's and B's must be D's (parameters in conflict;
     * the guide states the rule for C and D only, and broadcasting is stride 0, not count 1). */
    if (a->batch != d->batch || b->batch != d->batch) return CUBLAS_STATUS_INVALID_VALUE;
    *m = (int64_t)d->rows, *n = (int64_t)d->cols, *k = (int64_t)ak;
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ the algorithm */

/* The alignment an algorithm may assume for one matrix: what the caller declared
 * (header, MIN_ALIGNMENT_*_BYTES: "Selecting a smaller value will exclude algorithms that can not
 * work with matrix A that is not as strictly aligned as they need"), also met by the leading
 * dimension and the batch stride (header, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES: "required for
 * buffer pointer, leading dimension, and possibly other strides"), at most 16 bytes (the widest
 * access; the guide's Tensor Core usage asks for 16-byte pointers and ld*size). 0: no algorithm,
 * the declared alignment is below the element size. */
static uint32_t algo_alignment(const lt_layout *l, uint32_t declared)
{
    const uint64_t size = (uint64_t)lt_type_size(l->type);
    uint64_t r = pow2_floor(declared < 16 ? declared : 16);
    r = pow2_dividing((uint64_t)l->ld * size, r ? r : 1);
    if (l->batch > 1) r = pow2_dividing((uint64_t)l->stride * size, r);
    return r >= size ? (uint32_t)r : 0;
}

cublasStatus_t lt_choose_algo(const lt_desc *op, const lt_layout *a, const lt_layout *b, const lt_layout *c,
                              const lt_layout *d, const lt_pref *pref, lt_algo *out)
{
    int64_t m, n, k;
    cublasStatus_t st = lt_check_problem(op, a, b, c, d, &m, &n, &k);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    memset(out, 0, sizeof *out);
    out->magic = LT_ALGO_MAGIC;
    out->compute = op->compute, out->scale = op->scale, out->atype = a->type, out->ctype = d->type;
    out->epilogue = op->epilogue;
    out->bias_type = op->bias_type == LT_DEFAULT_BIAS_TYPE ? d->type : op->bias_type;
    const uint32_t al_a = algo_alignment(a, pref->align_a), al_b = algo_alignment(b, pref->align_b);
    const uint32_t al_c = algo_alignment(c, pref->align_c), al_d = algo_alignment(d, pref->align_d);
    /* No kernel reads a matrix less aligned than its elements: the heuristic returns no
     * algorithm (returnAlgoCount = 0, NOT_SUPPORTED: header, "if no heuristic function
     * available for current configuration"). */
    if (!al_a || !al_b || !al_c || !al_d) return CUBLAS_STATUS_NOT_SUPPORTED;
    out->align_a = (uint16_t)al_a, out->align_b = (uint16_t)al_b, out->align_c = (uint16_t)al_c;
    out->align_d = (uint16_t)al_d;
    const int epi = lt_epilogue_bits(op->epilogue);
    if (uses_bias(epi)) {
        /* header, BIAS_POINTER: "Routines that don't dereference this pointer, like
         * cublasLtMatmulAlgoGetHeuristic() depend on its value to determine expected pointer
         * alignment." */
        const uint64_t r = pow2_dividing((uint64_t)(uintptr_t)op->bias, 16);
        if (r < (uint64_t)lt_type_size(out->bias_type)) return CUBLAS_STATUS_NOT_SUPPORTED;
        out->align_bias = (uint16_t)r;
    }
    if (uses_aux(epi)) {
        /* header, EPILOGUE_AUX_POINTER: the same sentence; the element size at least. */
        const uint64_t r = pow2_dividing((uint64_t)(uintptr_t)op->aux, 16);
        if (r < (uint64_t)lt_type_size(d->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
        out->align_aux = (uint16_t)r;
    }
    /* 16-bit storage is widened to f32 panels: an algorithm uses the workspace for them when the
     * preference allows that much (header, MAX_WORKSPACE_BYTES: "Maximum allowed workspace size",
     * default 0), otherwise it is an algorithm without workspace. */
    const uint64_t need = lt_scratch_bytes(a->type, m, n, k);
    out->workspace = need && pref->max_workspace >= need ? need : 0;
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ one run */

static int misaligned(const void *p, const lt_layout *l, uint32_t align)
{
    const uint64_t size = (uint64_t)lt_type_size(l->type);
    if ((uintptr_t)p % align || ((uint64_t)l->ld * size) % align) return 1;
    return l->batch > 1 && ((uint64_t)l->stride * size) % align;
}

cublasStatus_t lt_check_run(const lt_algo *algo, const lt_desc *op, const lt_layout *a, const lt_layout *b,
                            const lt_layout *c, const lt_layout *d, const void *A, const void *B, const void *C,
                            const void *D, const void *workspace, size_t workspace_bytes)
{
    /* header, cublasLtMatmulAlgoCheck: INVALID_VALUE "if matrix layout descriptors or operation
     * descriptor don't match algo descriptor". */
    const int32_t bias_type = op->bias_type == LT_DEFAULT_BIAS_TYPE ? d->type : op->bias_type;
    if (algo->magic != LT_ALGO_MAGIC || algo->compute != op->compute || algo->scale != op->scale ||
        algo->atype != a->type || algo->ctype != d->type || algo->epilogue != op->epilogue ||
        (uses_bias(lt_epilogue_bits(op->epilogue)) && algo->bias_type != bias_type))
        return CUBLAS_STATUS_INVALID_VALUE;
    /* header, cublasLtMatmul: INVALID_VALUE "when workspaceSizeInBytes is less than workspace
     * required by configured algo". */
    if (workspace_bytes < algo->workspace || (algo->workspace && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
    /* guide, cublasLtMatmul(): "The workspace pointer must be aligned to at least a multiple of
     * 256 bytes." */
    if (workspace && workspace_bytes && (uintptr_t)workspace % 256) return CUBLAS_STATUS_INVALID_VALUE;
    /* guide, cublasLtMatmul(): in place means "C == D and Cdesc == Ddesc"; a C that is D read
     * through another layout is neither in place nor out of place. */
    if (C == D && (c->ld != d->ld || (d->batch > 1 && c->stride != d->stride))) return CUBLAS_STATUS_INVALID_VALUE;
    /* The matrices themselves (the stand-in does not let a NULL through to a fault). With
     * beta == 0 C is not read and may be NULL, as in every cuBLAS GEMM. */
    if (!A || !B || !D) return CUBLAS_STATUS_INVALID_VALUE;
    const int epi = lt_epilogue_bits(op->epilogue);
    if (uses_bias(epi) && !op->bias) return CUBLAS_STATUS_INVALID_VALUE;
    /* header, EPILOGUE_AUX_POINTER: an output of GELU_AUX*, an input of DGELU*. */
    if (uses_aux(epi) && !op->aux) return CUBLAS_STATUS_INVALID_VALUE;
    /* An algorithm needs the alignment it was chosen for (header, cublasLtMatmulAlgoCheck:
     * success "doesn't fully guarantee algo will run (will fail if e.g. buffers are not correctly
     * aligned)"); the real cublasLtMatmul answers NOT_SUPPORTED for under-aligned operands
     * (pytorch/pytorch#92201, 2-byte-aligned inputs). */
    if (misaligned(A, a, algo->align_a) || misaligned(B, b, algo->align_b) || misaligned(D, d, algo->align_d) ||
        (C && misaligned(C, c, algo->align_c)))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (uses_bias(epi) && (uintptr_t)op->bias % algo->align_bias) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (uses_aux(epi) && (uintptr_t)op->aux % algo->align_aux) return CUBLAS_STATUS_NOT_SUPPORTED;
    return CUBLAS_STATUS_SUCCESS;
}
