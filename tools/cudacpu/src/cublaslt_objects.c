/* cublaslt_objects.c (cudacpu) — the handle and the three descriptors of the cuBLASLt stand-in
 * (matmul, matrix layout, heuristic preference): creation with cuBLASLt's defaults, destruction,
 * and attribute setting with the checks cublasLt.h documents for every *SetAttribute call
 * ("CUBLAS_STATUS_INVALID_VALUE if buf is NULL or sizeInBytes doesn't match size of internal
 * storage for selected attribute").
 *
 * An attribute this stand-in does not model is refused with CUBLAS_STATUS_NOT_SUPPORTED rather
 * than stored and ignored: a caller that sets it would otherwise get a product the real library
 * would not compute. Values are checked where the real library checks them, at the heuristic and
 * at cublasLtMatmul (cublaslt_rules.c), not here. */
#include "cublaslt_internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout outgrows the semi-opaque type");
_Static_assert(sizeof(lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "matmul desc outgrows the semi-opaque type");
_Static_assert(sizeof(lt_pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference outgrows the semi-opaque type");

/* Copies an attribute value of exactly `want` bytes, as every SetAttribute documents. */
static cublasStatus_t take(void *dst, size_t want, const void *buf, size_t n)
{
    if (!buf || n != want) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(dst, buf, want);
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ handle */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasLtContext *h = calloc(1, sizeof *h);
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = LT_HANDLE_MAGIC;
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle || lightHandle->magic != LT_HANDLE_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    lightHandle->magic = 0;
    free(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ matmul descriptor */

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType)
{
    if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
    lt_desc *d = calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    d->compute = (int32_t)computeType;
    d->scale = (int32_t)scaleType;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->fill_mode = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = LT_DEFAULT_BIAS_TYPE;
    d->aux_type = LT_DEFAULT_BIAS_TYPE;
    *matmulDesc = (cublasLtMatmulDesc_t)(void *)d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    free(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes)
{
    if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
    lt_desc *d = (lt_desc *)(void *)matmulDesc;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return take(&d->compute, sizeof d->compute, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return take(&d->scale, sizeof d->scale, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return take(&d->pointer_mode, sizeof d->pointer_mode, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(&d->transa, sizeof d->transa, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(&d->transb, sizeof d->transb, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSC: return take(&d->transc, sizeof d->transc, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return take(&d->fill_mode, sizeof d->fill_mode, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(&d->epilogue, sizeof d->epilogue, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take((void *)&d->bias, sizeof d->bias, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return take(&d->bias_stride, sizeof d->bias_stride, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return take(&d->bias_type, sizeof d->bias_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return take((void *)&d->aux, sizeof d->aux, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return take(&d->aux_ld, sizeof d->aux_ld, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
        return take(&d->aux_stride, sizeof d->aux_stride, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return take(&d->aux_type, sizeof d->aux_type, buf, sizeInBytes);
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* ------------------------------------------------------------ matrix layout */

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    /* cublasLt.h documents only ALLOC_FAILED for creation: the leading dimension is checked
     * against the rows where the library uses it (lt_check_problem). */
    if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
    lt_layout *l = calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    l->type = (int32_t)type, l->order = CUBLASLT_ORDER_COL, l->rows = rows, l->cols = cols, l->ld = ld;
    l->batch = 1;
    *matLayout = (cublasLtMatrixLayout_t)(void *)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    free(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
    lt_layout *l = (lt_layout *)(void *)matLayout;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
        uint32_t t;
        cublasStatus_t st = take(&t, sizeof t, buf, sizeInBytes);
        if (st == CUBLAS_STATUS_SUCCESS) l->type = (int32_t)t;
        return st;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return take(&l->order, sizeof l->order, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return take(&l->rows, sizeof l->rows, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return take(&l->cols, sizeof l->cols, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_LD: return take(&l->ld, sizeof l->ld, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return take(&l->batch, sizeof l->batch, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return take(&l->stride, sizeof l->stride, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return take(&l->plane_offset, sizeof l->plane_offset, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return take(&l->batch_mode, sizeof l->batch_mode, buf, sizeInBytes);
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* ------------------------------------------------------------ heuristic preference */

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    lt_pref *p = calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
    /* cublasLt.h: MAX_WORKSPACE_BYTES "default: 0 - no workspace allowed"; MIN_ALIGNMENT_*_BYTES
     * "default: 256". */
    p->align_a = p->align_b = p->align_c = p->align_d = 256;
    *pref = (cublasLtMatmulPreference_t)(void *)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    lt_pref *p = (lt_pref *)(void *)pref;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return take(&p->search_mode, sizeof p->search_mode, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return take(&p->max_workspace, sizeof p->max_workspace, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return take(&p->align_a, sizeof p->align_a, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return take(&p->align_b, sizeof p->align_b, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return take(&p->align_c, sizeof p->align_c, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return take(&p->align_d, sizeof p->align_d, buf, sizeInBytes);
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
