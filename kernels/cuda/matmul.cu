/* matmul.cu — row-major batched GEMM through cuBLASLt, with its bias, bias-gradient and GELU
 * epilogues (matmul.h) and a cache of matmul plans.
 *
 * cuBLASLt is column-major. A row-major matrix X[r,c] is the column-major X^T[c,r] with
 * leading dimension c, so the row-major C = op(A) op(B) is computed as the column-major
 * C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B and its "B" is our A, with m and n
 * swapped, and each transpose flag carries over unchanged. The bias (n elements, one per
 * column of row-major C) is then one per row of the column-major D, which is what
 * CUBLASLT_EPILOGUE_BIAS adds. Likewise the bias gradient of our A (the sums of op(A) over k,
 * one per row of row-major C) is the sums of cuBLASLt's op(B) over k, one per column of D:
 * BGRADB; DGELU_BGRAD's sums over each row of D are our column sums; the aux matrix, stored
 * like C, is column-major with leading dimension aux_ld.
 *
 * A plan (descriptor, three layouts, the heuristic's algorithm) depends on the shape,
 * strides, dtypes, transposes, epilogue and on the alignment of every pointer (the
 * heuristic excludes kernels that need more alignment than we declare), so all of those
 * form the key. The bias and aux pointers themselves are set on the descriptor at each call. */
#include "cuda/cublaslt_api.h"
#include "cuda/cuda_check.h"
#include "cuda/matmul.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ plans and their cache */

/* All int64 so that the struct has no padding and memcmp compares keys. */
struct gemm_key {
    int64_t m, n, k, batch, stride_a, stride_b, stride_c;
    int64_t trans_a, trans_b, ab_dtype, c_dtype, tf32, has_bias;
    int64_t align_a, align_b, align_c, align_bias;
    int64_t epilogue, aux_ld, align_aux; /* TR_GEMM_EPI_*; aux_ld and align_aux 0 without aux */
};

struct gemm_plan {
    gemm_key key;
    int live;
    int refused; /* the heuristic found no algorithm for the key: kept (without descriptors) so
                    that the next call with it fails at once instead of asking again */
    const tr_cublaslt_api *api; /* the device's cuBLASLt table, which made (and destroys) the plan */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
};

enum { cache_slots = 64 };

struct gemm_cache {
    gemm_plan plans[cache_slots];
    int next_victim;
    uint64_t hits, misses;
};

static void plan_destroy(gemm_plan *p)
{
    /* Destroy calls only fail for a NULL or already destroyed object; nothing to report. */
    const tr_cublaslt_api *api = p->api;
    if (api && p->lc) (void)api->cublasLtMatrixLayoutDestroy(p->lc);
    if (api && p->lb) (void)api->cublasLtMatrixLayoutDestroy(p->lb);
    if (api && p->la) (void)api->cublasLtMatrixLayoutDestroy(p->la);
    if (api && p->op) (void)api->cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

extern "C" int tr_cuda_gemm_cache_new(void **out_cache, tr_error *err)
{
    gemm_cache *c = (gemm_cache *)calloc(1, sizeof *c);
    *out_cache = c;
    if (!c) return tr_fail(err, TR_EOOM, "tr_cuda_gemm_cache_new: out of host memory (%zu bytes).", sizeof *c);
    return TR_OK;
}

extern "C" void tr_cuda_gemm_cache_free(void *cache)
{
    gemm_cache *c = (gemm_cache *)cache;
    if (!c) return;
    for (int i = 0; i < cache_slots; i++)
        if (c->plans[i].live) plan_destroy(&c->plans[i]);
    free(c);
}

extern "C" void tr_cuda_gemm_cache_counts(const void *cache, uint64_t *hits, uint64_t *misses)
{
    const gemm_cache *c = (const gemm_cache *)cache;
    if (hits) *hits = c ? c->hits : 0;
    if (misses) *misses = c ? c->misses : 0;
}

/* ------------------------------------------------------------ building a plan */

static cudaDataType_t cuda_type(int dtype)
{
    switch (dtype) {
    case TR_BF16: return CUDA_R_16BF;
    case TR_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
    }
}

/* cuBLASLt's epilogue for ours, with or without the bias. */
static uint32_t lt_epilogue(int64_t epilogue, int64_t has_bias)
{
    switch (epilogue) {
    case TR_GEMM_EPI_BGRAD_A: return CUBLASLT_EPILOGUE_BGRADB;
    case TR_GEMM_EPI_GELU_AUX: return has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case TR_GEMM_EPI_DGELU: return has_bias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    default: return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    }
}

static const char *epilogue_name(int64_t epilogue, int64_t has_bias)
{
    switch (epilogue) {
    case TR_GEMM_EPI_BGRAD_A: return "BGRADB";
    case TR_GEMM_EPI_GELU_AUX: return has_bias ? "GELU_AUX_BIAS" : "GELU_AUX";
    case TR_GEMM_EPI_DGELU: return has_bias ? "DGELU_BGRAD" : "DGELU";
    default: return has_bias ? "BIAS" : "DEFAULT";
    }
}

static int uses_aux(int64_t epilogue) { return epilogue == TR_GEMM_EPI_GELU_AUX || epilogue == TR_GEMM_EPI_DGELU; }

/* The largest power of two (at most 256) dividing the address and the batch stride. */
static int64_t alignment_of(const void *p, int64_t stride_bytes, int64_t batch)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | 256u;
    if (batch > 1 && stride_bytes != 0) bits |= (uint64_t)stride_bytes;
    return (int64_t)(bits & (~bits + 1));
}

static int layout_new(const tr_cublaslt_api *api, cublasLtMatrixLayout_t *out, int dtype, int64_t rows,
                      int64_t cols, int64_t batch, int64_t stride, tr_error *err)
{
    TR_CUBLAS_CHECK(err, api->cublasLtMatrixLayoutCreate(out, cuda_type(dtype), (uint64_t)rows, (uint64_t)cols, rows));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        TR_CUBLAS_CHECK(err, api->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                              sizeof count));
        TR_CUBLAS_CHECK(err, api->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                              &stride, sizeof stride));
    }
    return TR_OK;
}

/* Fills p (zeroed by the caller) for key; on failure p holds what was made so far, for
 * plan_destroy. */
static int plan_build(gemm_plan *p, const gemm_key *key, const tr_cuda_blas *env, const void *bias, const void *aux,
                      tr_error *err)
{
    const tr_cublaslt_api *api = (const tr_cublaslt_api *)env->api;
    p->key = *key;
    p->api = api;
    cublasComputeType_t compute = key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));
    cublasOperation_t ta = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our B */
    cublasOperation_t tb = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    uint32_t epi = lt_epilogue(key->epilogue, key->has_bias);
    if (epi != CUBLASLT_EPILOGUE_DEFAULT)
        TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (key->has_bias) {
        /* the bias (read or written) has D's type, as cuBLASLt's header requires of these epilogues */
        int32_t bias_type = (int32_t)cuda_type((int)key->c_dtype);
        TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                            sizeof bias_type));
        /* The heuristic reads the pointer's alignment. */
        TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                            sizeof bias));
    }
    if (uses_aux(key->epilogue)) {
        /* the aux matrix has D's type (the default) and D's layout; the heuristic reads its alignment */
        int64_t aux_ld = key->aux_ld;
        TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                            sizeof aux_ld));
        TR_CUBLAS_CHECK(err, api->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                                            sizeof aux));
    }
    const int64_t m = key->m, n = key->n, k = key->k, batch = key->batch;
    int rc;
    if ((rc = layout_new(api, &p->la, (int)key->ab_dtype, key->trans_b ? k : n, key->trans_b ? n : k, batch,
                         key->stride_b, err)) != TR_OK)
        return rc;
    if ((rc = layout_new(api, &p->lb, (int)key->ab_dtype, key->trans_a ? m : k, key->trans_a ? k : m, batch,
                         key->stride_a, err)) != TR_OK)
        return rc;
    if ((rc = layout_new(api, &p->lc, (int)key->c_dtype, n, m, batch, key->stride_c, err)) != TR_OK) return rc;

    cublasLtMatmulPreference_t pref;
    TR_CUBLAS_CHECK(err, api->cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = env->workspace_bytes;
    uint32_t al_a = (uint32_t)key->align_b, al_b = (uint32_t)key->align_a, al_c = (uint32_t)key->align_c;
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasLtHandle_t lt = (cublasLtHandle_t)env->lt;
    if ((rc = TR_CUBLAS_CALL(err, api->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                       &ws, sizeof ws))) == TR_OK &&
        (rc = TR_CUBLAS_CALL(err, api->cublasLtMatmulPreferenceSetAttribute(
                                      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a))) == TR_OK &&
        (rc = TR_CUBLAS_CALL(err, api->cublasLtMatmulPreferenceSetAttribute(
                                      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b))) == TR_OK &&
        (rc = TR_CUBLAS_CALL(err, api->cublasLtMatmulPreferenceSetAttribute(
                                      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c))) == TR_OK &&
        (rc = TR_CUBLAS_CALL(err, api->cublasLtMatmulPreferenceSetAttribute(
                                      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c))) == TR_OK)
        rc = TR_CUBLAS_CALL(err, api->cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                                                &result, &found));
    (void)api->cublasLtMatmulPreferenceDestroy(pref);
    if (rc != TR_OK || found < 1) p->refused = 1;
    if (rc != TR_OK) return rc;
    if (found < 1)
        return tr_fail(err, TR_EINTERNAL,
                       "tr_k_matmul_fwd_cuda: cuBLASLt has no algorithm for %s -> %s, m=%lld n=%lld k=%lld batch=%lld, "
                       "trans_a=%d trans_b=%d, epilogue %s, alignments A=%lld B=%lld C=%lld bytes, workspace %llu "
                       "bytes. Pad the inner dimensions to multiples of 8 or use another dtype pair.",
                       tr_dtype_name((int)key->ab_dtype), tr_dtype_name((int)key->c_dtype), (long long)m,
                       (long long)n, (long long)k, (long long)batch, (int)key->trans_a, (int)key->trans_b,
                       epilogue_name(key->epilogue, key->has_bias), (long long)key->align_a, (long long)key->align_b,
                       (long long)key->align_c, (unsigned long long)ws);
    p->algo = result.algo;
    p->live = 1;
    return TR_OK;
}

/* ------------------------------------------------------------ argument checks */

static int check_desc(const tr_cuda_blas *env, void *c, const void *a, const void *b, const void *bias,
                      const tr_cuda_gemm_desc *d, tr_error *err)
{
    if (env && !env->lt && env->unavailable) return tr_fail(err, TR_EUSER, "%s", env->unavailable);
    if (!env || !env->lt || !env->api || !d)
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: NULL %s.", !d ? "descriptor" : "cuBLASLt environment");
    if (d->m < 0 || d->n < 0 || d->k < 1 || d->batch < 1)
        return tr_fail(err, TR_EUSER,
                       "tr_k_matmul_fwd_cuda: bad shape m=%lld n=%lld k=%lld batch=%lld (need m, n >= 0, k >= 1, "
                       "batch >= 1).",
                       (long long)d->m, (long long)d->n, (long long)d->k, (long long)d->batch);
    if (d->m > INT32_MAX || d->n > INT32_MAX || d->k > INT32_MAX || d->batch > INT32_MAX)
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: a dimension exceeds 2^31-1; split the product.");
    int ab = d->ab_dtype, cd = d->c_dtype;
    int ok = (ab == TR_F32 && cd == TR_F32) || ((ab == TR_BF16 || ab == TR_F16) && (cd == ab || cd == TR_F32));
    if (!ok)
        return tr_fail(err, TR_EUSER,
                       "tr_k_matmul_fwd_cuda: dtype pair %s -> %s is not supported; use f32 -> f32, bf16 -> bf16|f32 "
                       "or f16 -> f16|f32.",
                       tr_dtype_name(ab), tr_dtype_name(cd));
    if (d->tf32 && ab != TR_F32)
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: tf32 applies to f32 inputs only (inputs are %s).",
                       tr_dtype_name(ab));
    if ((d->trans_a != 0 && d->trans_a != 1) || (d->trans_b != 0 && d->trans_b != 1))
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: trans_a and trans_b must be 0 or 1.");
    if (d->m > 0 && d->n > 0 && (!a || !b || !c))
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: NULL matrix pointer.");
    if (d->batch > 1 && (d->stride_a < 0 || d->stride_b < 0 || d->stride_c < d->m * d->n))
        return tr_fail(err, TR_EUSER,
                       "tr_k_matmul_fwd_cuda: batch strides must be >= 0 and stride_c >= m*n (got %lld, %lld, %lld).",
                       (long long)d->stride_a, (long long)d->stride_b, (long long)d->stride_c);
    const int epi = d->epilogue;
    if (epi < TR_GEMM_EPI_NONE || epi > TR_GEMM_EPI_DGELU)
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: epilogue %d is unknown (TR_GEMM_EPI_*).", epi);
    if (epi == TR_GEMM_EPI_BGRAD_A && !bias)
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: the epilogue BGRAD_A writes the bias; it is NULL.");
    if (uses_aux(epi) && (!d->aux || d->aux_ld < d->n || d->aux_ld % 8))
        return tr_fail(err, TR_EUSER,
                       "tr_k_matmul_fwd_cuda: the GELU epilogues need aux with aux_ld >= n and a multiple of 8 (aux "
                       "%s, aux_ld %lld, n %lld).",
                       d->aux ? "given" : "NULL", (long long)d->aux_ld, (long long)d->n);
    if (epi != TR_GEMM_EPI_NONE && d->batch > 1)
        return tr_fail(err, TR_EUSER, "tr_k_matmul_fwd_cuda: epilogue %s with batch %lld; it takes batch 1.",
                       epilogue_name(epi, bias != NULL), (long long)d->batch);
    return TR_OK;
}

/* ------------------------------------------------------------ the product */

extern "C" int tr_k_matmul_fwd_cuda(const tr_cuda_blas *env, void *c, const void *a, const void *b, const void *bias,
                            const tr_cuda_gemm_desc *d, tr_error *err)
{
    int rc = check_desc(env, c, a, b, bias, d, err);
    if (rc != TR_OK || d->m == 0 || d->n == 0) return rc;

    gemm_key key;
    memset(&key, 0, sizeof key);
    key.m = d->m, key.n = d->n, key.k = d->k, key.batch = d->batch;
    if (d->batch > 1) key.stride_a = d->stride_a, key.stride_b = d->stride_b, key.stride_c = d->stride_c;
    key.trans_a = d->trans_a, key.trans_b = d->trans_b, key.ab_dtype = d->ab_dtype, key.c_dtype = d->c_dtype;
    key.tf32 = d->tf32 ? 1 : 0;
    key.has_bias = bias != NULL;
    const int64_t ab_size = (int64_t)tr_dtype_size(d->ab_dtype), c_size = (int64_t)tr_dtype_size(d->c_dtype);
    key.align_a = alignment_of(a, key.stride_a * ab_size, d->batch);
    key.align_b = alignment_of(b, key.stride_b * ab_size, d->batch);
    key.align_c = alignment_of(c, key.stride_c * c_size, d->batch);
    key.align_bias = bias ? alignment_of(bias, 0, 1) : 0;
    key.epilogue = d->epilogue;
    if (uses_aux(d->epilogue)) key.aux_ld = d->aux_ld, key.align_aux = alignment_of(d->aux, 0, 1);

    gemm_cache *cache = (gemm_cache *)env->cache;
    gemm_plan local;
    gemm_plan *plan = NULL;
    if (cache) {
        for (int i = 0; i < cache_slots && !plan; i++)
            if (cache->plans[i].live && memcmp(&cache->plans[i].key, &key, sizeof key) == 0) plan = &cache->plans[i];
        if (plan) {
            cache->hits++;
        } else {
            cache->misses++;
            plan = &cache->plans[cache->next_victim];
            cache->next_victim = (cache->next_victim + 1) % cache_slots;
            if (plan->live) plan_destroy(plan);
        }
    } else {
        plan = &local;
    }
    if (!plan->live) {
        memset(plan, 0, sizeof *plan);
        if ((rc = plan_build(plan, &key, env, bias, d->aux, err)) != TR_OK) {
            const int refused = plan->refused;
            plan_destroy(plan);
            if (refused && plan != &local) plan->key = key, plan->live = 1, plan->refused = 1;
            return rc;
        }
    } else if (plan->refused) {
        return tr_fail(err, TR_EINTERNAL,
                       "tr_k_matmul_fwd_cuda: cuBLASLt has no algorithm for %s -> %s, m=%lld n=%lld k=%lld, epilogue "
                       "%s (its heuristic found none for the same shapes, dtypes and alignments before).",
                       tr_dtype_name((int)key.ab_dtype), tr_dtype_name((int)key.c_dtype), (long long)key.m,
                       (long long)key.n, (long long)key.k, epilogue_name(key.epilogue, key.has_bias));
    }

    if (bias)
        rc = TR_CUBLAS_CALL(err, plan->api->cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                                sizeof bias));
    if (rc == TR_OK && uses_aux(d->epilogue))
        rc = TR_CUBLAS_CALL(err, plan->api->cublasLtMatmulDescSetAttribute(
                                     plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &d->aux, sizeof d->aux));
    if (rc == TR_OK)
        rc = TR_CUBLAS_CALL(err, plan->api->cublasLtMatmul((cublasLtHandle_t)env->lt, plan->op, &d->alpha, b, plan->la, a,
                                                plan->lb, &d->beta, c, plan->lc, c, plan->lc, &plan->algo,
                                                env->workspace, (size_t)env->workspace_bytes,
                                                (cudaStream_t)env->stream));
    if (plan == &local) plan_destroy(&local);
    return rc;
}
