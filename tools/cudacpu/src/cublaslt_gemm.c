/* cublaslt_gemm.c (cudacpu) — the products of the cuBLASLt stand-in over the CPU BLAS
 * (cblas_sgemm, with the threads OpenBLAS is configured with; no threads of its own).
 *
 * Semantics are cuBLASLt's CUBLAS_COMPUTE_32F: products accumulate in f32 (never double), then
 * D = epilogue(alpha * acc + beta * C) is formed in f32 (the scale type) and stored in D's type,
 * rounded to nearest even for bf16 and f16. With beta == 0 C is not read (a NaN there does not
 * reach D). The bias epilogue adds bias[row] of D, in D's type, after the scaling. The GELU
 * epilogues use the tanh approximation, as cuBLASLt's do, on the f32 value x (after scaling and
 * bias): GELU* store GELU(x), *_AUX* also store x itself in aux (D's type, leading dimension
 * AUX_LD); DGELU* store x * GELU'(aux); DGELU_BGRAD also sums each row of D (f32, before D's
 * rounding) into the bias vector, in the bias type, once the whole product is done.
 *
 * f32 storage goes straight to the BLAS. 16-bit storage is widened to f32 panels of at most
 * TILE x TILE elements (scratch bounded by lt_scratch_bytes, whatever the problem size); each
 * TILE x TILE tile of D accumulates its K panels in an f32 tile before the epilogue rounds it
 * once. BGRADB sums op(B) over k into the bias vector (f32, then the bias type) before the
 * product. Invariant on entry: lt_check_problem accepted the problem (every ld >= max(1, rows) where
 * the BLAS sees it, sizes fit an int), so cblas_sgemm, which reports bad arguments only through
 * xerbla and has no status to check, is never called with one. */
#include "cublaslt_internal.h"
#include "cudacpu_half_bits.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

enum { TILE = 512 };

/* Widens rows x cols of a column-major 16-bit matrix (leading dimension ld) into dst (ld rows). */
static void widen(float *dst, const uint16_t *src, int32_t type, int64_t rows, int64_t cols, int64_t ld)
{
    for (int64_t j = 0; j < cols; j++) {
        const uint16_t *s = src + j * ld;
        float *o = dst + j * rows;
        if (type == CUDA_R_16BF)
            for (int64_t i = 0; i < rows; i++) o[i] = cudacpu_bf16_to_f32(s[i]);
        else
            for (int64_t i = 0; i < rows; i++) o[i] = cudacpu_f16_to_f32(s[i]);
    }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

uint64_t lt_scratch_bytes(int32_t ab_type, int64_t m, int64_t n, int64_t k)
{
    if (ab_type == CUDA_R_32F || m == 0 || n == 0) return 0;
    const uint64_t mb = (uint64_t)min64(m, TILE), nb = (uint64_t)min64(n, TILE), kb = (uint64_t)min64(k, TILE);
    return 4u * (mb * kb + kb * nb + mb * nb + 2 * mb); /* panels, the f32 tile, a C column, the bias */
}

/* ------------------------------------------------------------ the epilogue */

/* Widens n elements of any storage type (f32 is copied). */
static void widen_any(float *dst, const void *src, int32_t type, int64_t n)
{
    if (type == CUDA_R_32F) memcpy(dst, src, (size_t)n * sizeof *dst);
    else widen(dst, src, type, n, 1, n);
}

/* GELU's tanh approximation and its derivative */
static float gelu_tanh(float x)
{
    const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
static float dgelu_tanh(float x)
{
    const float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}

/* The GELU epilogues on v[0..rows), rows i0.. of column j of batch bi of D (after scaling and
 * bias); aux element (i, j) of the batch is aux[bi * aux_stride + i + j * aux_ld]. abuf: rows
 * floats for a 16-bit aux column (unused for f32). */
static void gelu_column(const lt_problem *p, int64_t bi, int64_t i0, int64_t j, float *v, int64_t rows, float *abuf)
{
    const int epi = lt_epilogue_bits(p->op->epilogue);
    const int32_t at = p->ld->type;
    const int as = at == CUDA_R_32F ? 4 : 2;
    char *aux = p->aux ? (char *)p->aux + (size_t)(bi * p->op->aux_stride + i0 + j * p->op->aux_ld) * as : NULL;
    if (epi & LT_EPI_AUX_OUT) {
        if (at == CUDA_R_32F) memcpy(aux, v, (size_t)rows * sizeof *v);
        else if (at == CUDA_R_16BF)
            for (int64_t i = 0; i < rows; i++) ((uint16_t *)aux)[i] = cudacpu_f32_to_bf16(v[i]);
        else
            for (int64_t i = 0; i < rows; i++) ((uint16_t *)aux)[i] = cudacpu_f32_to_f16(v[i]);
    }
    if (epi & LT_EPI_GELU)
        for (int64_t i = 0; i < rows; i++) v[i] = gelu_tanh(v[i]);
    if (epi & LT_EPI_DGELU) {
        const float *x = at == CUDA_R_32F ? (const float *)(void *)aux : abuf;
        if (at != CUDA_R_32F) widen(abuf, (const uint16_t *)(void *)aux, at, rows, 1, rows);
        for (int64_t i = 0; i < rows; i++) v[i] *= dgelu_tanh(x[i]);
    }
    if (epi & LT_EPI_BGRAD)
        for (int64_t i = 0; i < rows; i++) p->bgrad[i0 + i] += v[i];
}

/* D(i0.., j0..) = alpha * acc + beta * C + bias[i] over a rows x cols tile, in f32, one column
 * at a time (each step a plain loop the compiler vectorizes); acc is rows x cols, leading
 * dimension rows, and is overwritten. cbuf and bbuf hold `rows` floats each. */
static void epilogue(const lt_problem *p, int64_t bi, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float *acc,
                     float *cbuf, float *bbuf)
{
    const int32_t ct = p->lc->type, dt = p->ld->type, bt = p->op->bias_type < 0 ? dt : p->op->bias_type;
    const float alpha = p->alpha, beta = p->beta;
    const int ds = dt == CUDA_R_32F ? 4 : 2, cs = ct == CUDA_R_32F ? 4 : 2, bs = bt == CUDA_R_32F ? 4 : 2;
    if (p->bias) widen_any(bbuf, (const char *)p->bias + (size_t)(bi * p->op->bias_stride + i0) * bs, bt, rows);
    for (int64_t j = 0; j < cols; j++) {
        float *v = acc + j * rows;
        for (int64_t i = 0; i < rows; i++) v[i] *= alpha;
        if (beta != 0.0f) {
            widen_any(cbuf, (const char *)p->C + (size_t)(bi * p->lc->stride + i0 + (j0 + j) * p->lc->ld) * cs, ct, rows);
            for (int64_t i = 0; i < rows; i++) v[i] += beta * cbuf[i];
        }
        if (p->bias)
            for (int64_t i = 0; i < rows; i++) v[i] += bbuf[i];
        if (p->aux || p->bgrad || (lt_epilogue_bits(p->op->epilogue) & LT_EPI_GELU))
            gelu_column(p, bi, i0, j0 + j, v, rows, cbuf);
        char *d = (char *)p->D + (size_t)(bi * p->ld->stride + i0 + (j0 + j) * p->ld->ld) * ds;
        if (dt == CUDA_R_32F) memcpy(d, v, (size_t)rows * sizeof *v);
        else if (dt == CUDA_R_16BF)
            for (int64_t i = 0; i < rows; i++) ((uint16_t *)d)[i] = cudacpu_f32_to_bf16(v[i]);
        else
            for (int64_t i = 0; i < rows; i++) ((uint16_t *)d)[i] = cudacpu_f32_to_f16(v[i]);
    }
}

/* ------------------------------------------------------------ f32 storage */

static void gemm_f32(const lt_problem *p, int64_t bi)
{
    const float *A = (const float *)p->A + bi * p->la->stride, *B = (const float *)p->B + bi * p->lb->stride;
    float *D = (float *)p->D + bi * p->ld->stride;
    const int64_t ldd = p->ld->ld;
    float beta = p->beta;
    if (beta != 0.0f && p->C != p->D) { /* out of place: D starts as C, then D = alpha AB + beta D */
        const float *C = (const float *)p->C + bi * p->lc->stride;
        for (int64_t j = 0; j < p->n; j++) memmove(D + j * ldd, C + j * p->lc->ld, (size_t)p->m * sizeof *D);
    }
    if (p->k == 0) { /* nothing to accumulate: D = beta C */
        for (int64_t j = 0; j < p->n; j++)
            for (int64_t i = 0; i < p->m; i++) D[i + j * ldd] = beta != 0.0f ? beta * D[i + j * ldd] : 0.0f;
    } else {
        cblas_sgemm(CblasColMajor, p->trans_a ? CblasTrans : CblasNoTrans, p->trans_b ? CblasTrans : CblasNoTrans,
                    (int)p->m, (int)p->n, (int)p->k, p->alpha, A, (int)p->la->ld, B, (int)p->lb->ld, beta, D, (int)ldd);
    }
    if (p->bias) {
        const float *bias = (const float *)p->bias + bi * p->op->bias_stride;
        for (int64_t j = 0; j < p->n; j++)
            for (int64_t i = 0; i < p->m; i++) D[i + j * ldd] += bias[i];
    }
    if (p->aux || p->bgrad || (lt_epilogue_bits(p->op->epilogue) & LT_EPI_GELU))
        for (int64_t j = 0; j < p->n; j++) gelu_column(p, bi, 0, j, D + j * ldd, p->m, NULL);
}

/* ------------------------------------------------------------ 16-bit storage */

static void gemm_16(const lt_problem *p, int64_t bi)
{
    const int32_t t = p->la->type;
    const uint16_t *A = (const uint16_t *)p->A + bi * p->la->stride, *B = (const uint16_t *)p->B + bi * p->lb->stride;
    const int64_t mb_max = min64(p->m, TILE), nb_max = min64(p->n, TILE), kb_max = min64(p->k, TILE);
    float *ap = p->scratch, *bp = ap + mb_max * kb_max, *acc = bp + kb_max * nb_max, *cbuf = acc + mb_max * nb_max;
    float *bbuf = cbuf + mb_max;
    for (int64_t j0 = 0; j0 < p->n; j0 += TILE)
        for (int64_t i0 = 0; i0 < p->m; i0 += TILE) {
            const int64_t mb = min64(TILE, p->m - i0), nb = min64(TILE, p->n - j0);
            if (p->k == 0) memset(acc, 0, (size_t)(mb * nb) * sizeof *acc);
            for (int64_t p0 = 0; p0 < p->k; p0 += TILE) {
                const int64_t kb = min64(TILE, p->k - p0);
                /* Each panel keeps its stored orientation; the BLAS applies the transpose. */
                if (p->trans_a) widen(ap, A + p0 + i0 * p->la->ld, t, kb, mb, p->la->ld);
                else widen(ap, A + i0 + p0 * p->la->ld, t, mb, kb, p->la->ld);
                if (p->trans_b) widen(bp, B + j0 + p0 * p->lb->ld, t, nb, kb, p->lb->ld);
                else widen(bp, B + p0 + j0 * p->lb->ld, t, kb, nb, p->lb->ld);
                cblas_sgemm(CblasColMajor, p->trans_a ? CblasTrans : CblasNoTrans,
                            p->trans_b ? CblasTrans : CblasNoTrans, (int)mb, (int)nb, (int)kb, 1.0f, ap,
                            (int)(p->trans_a ? kb : mb), bp, (int)(p->trans_b ? nb : kb), p0 == 0 ? 0.0f : 1.0f, acc,
                            (int)mb);
            }
            epilogue(p, bi, i0, j0, mb, nb, acc, cbuf, bbuf);
        }
}

/* ------------------------------------------------------------ BGRADB */

/* Stores a bias vector element in the bias type. */
static void store_bias(void *out, int32_t bt, int64_t i, float v)
{
    if (bt == CUDA_R_32F) ((float *)out)[i] = v;
    else if (bt == CUDA_R_16BF) ((uint16_t *)out)[i] = cudacpu_f32_to_bf16(v);
    else ((uint16_t *)out)[i] = cudacpu_f32_to_f16(v);
}

/* bias[j] = sum over p < k of op(B)[p, j] (f32, p ascending), for each of D's n columns: the
 * bias gradient of a layer whose output gradient is B (one batch: lt_check_problem). */
static void bgradb(const lt_problem *p)
{
    const int32_t t = p->lb->type, bt = p->op->bias_type < 0 ? p->ld->type : p->op->bias_type;
    const int64_t ld = p->lb->ld;
    void *out = (void *)(uintptr_t)p->op->bias; /* BIAS_POINTER: BGRADB's output */
    for (int64_t j = 0; j < p->n; j++) {
        float sum = 0.0f;
        for (int64_t q = 0; q < p->k; q++) {
            const int64_t at = p->trans_b ? j + q * ld : q + j * ld;
            if (t == CUDA_R_32F) sum += ((const float *)p->B)[at];
            else if (t == CUDA_R_16BF) sum += cudacpu_bf16_to_f32(((const uint16_t *)p->B)[at]);
            else sum += cudacpu_f16_to_f32(((const uint16_t *)p->B)[at]);
        }
        store_bias(out, bt, j, sum);
    }
}

/* ------------------------------------------------------------ entry */

void lt_gemm(const lt_problem *p)
{
    if (p->m == 0 || p->n == 0) return;
    if (lt_epilogue_bits(p->op->epilogue) & LT_EPI_BGRADB) bgradb(p);
    for (int64_t bi = 0; bi < p->batch; bi++) {
        if (p->la->type == CUDA_R_32F) gemm_f32(p, bi);
        else gemm_16(p, bi);
    }
    if (p->bgrad) { /* one batch (lt_check_problem): the row sums into the bias vector */
        const int32_t bt = p->op->bias_type < 0 ? p->ld->type : p->op->bias_type;
        void *out = (void *)(uintptr_t)p->op->bias; /* BIAS_POINTER: DGELU_BGRAD's output */
        for (int64_t i = 0; i < p->m; i++) store_bias(out, bt, i, p->bgrad[i]);
    }
}
