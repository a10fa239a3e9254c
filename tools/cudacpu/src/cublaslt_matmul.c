/* cublaslt_matmul.c (cudacpu) — the two calls that do the work in the cuBLASLt stand-in:
 * cublasLtMatmulAlgoGetHeuristic (one algorithm, or none with the real library's status) and
 * cublasLtMatmul (the checks of cublaslt_rules.c, then the product of cublaslt_gemm.c).
 *
 * The checks run at the call, as the library's do; the product is queued on the stream
 * (cudaLaunchHostFunc of the emulated runtime), so it runs in the stream's order, after the
 * copies and kernels queued before it and, with CUDACPU_STREAMS=deferred, only when something
 * forces the stream: a product read on another stream without a wait reads stale data, as on
 * a GPU. The job carries copies of the descriptor and layouts (the caller may destroy or
 * change them once the call returns). A program without the emulated runtime (this library's
 * own tests) gets the product at once. Device memory is host memory, so the workspace serves
 * directly as f32 scratch. */
#include "cublaslt_internal.h"
#include "host_launch.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    lt_problem p;
    lt_desc op;
    lt_layout la, lb, lc, ld;
    void *own;   /* scratch of its own, or NULL */
    float *bgrad; /* DGELU_BGRAD's row sums, or NULL */
} lt_job;

static void run_job(void *arg)
{
    lt_job *j = (lt_job *)arg;
    lt_gemm(&j->p);
    free(j->own);
    free(j->bgrad);
    free(j);
}

static int handle_ok(cublasLtHandle_t h) { return h && h->magic == LT_HANDLE_MAGIC; }

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount)
{
    if (!handle_ok(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* header: INVALID_VALUE "if requestedAlgoCount is less or equal to zero". */
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount || !preference)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    lt_algo algo;
    cublasStatus_t st = lt_choose_algo((const lt_desc *)(void *)operationDesc, (const lt_layout *)(void *)Adesc,
                                       (const lt_layout *)(void *)Bdesc, (const lt_layout *)(void *)Cdesc,
                                       (const lt_layout *)(void *)Ddesc, (const lt_pref *)(void *)preference, &algo);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    /* no algorithm for this epilogue on the card CUDACPU_LT_EPILOGUES stands for: none found */
    if (!lt_epilogue_offered(((const lt_desc *)(void *)operationDesc)->epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    memset(r, 0, sizeof *r);
    _Static_assert(sizeof(lt_algo) <= sizeof(cublasLtMatmulAlgo_t), "algo outgrows cublasLtMatmulAlgo_t");
    memcpy(&r->algo, &algo, sizeof algo);
    r->workspaceSize = (size_t)algo.workspace;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream)
{
    /* header: NOT_INITIALIZED "if cuBLASLt handle has not been initialized". */
    if (!handle_ok(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const lt_desc *op = (const lt_desc *)(void *)computeDesc;
    const lt_layout *la = (const lt_layout *)(void *)Adesc, *lb = (const lt_layout *)(void *)Bdesc;
    const lt_layout *lc = (const lt_layout *)(void *)Cdesc, *ld = (const lt_layout *)(void *)Ddesc;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    lt_problem p;
    memset(&p, 0, sizeof p);
    cublasStatus_t st = lt_check_problem(op, la, lb, lc, ld, &p.m, &p.n, &p.k);
    if (st != CUBLAS_STATUS_SUCCESS) return st;

    lt_algo chosen;
    if (algo) {
        memcpy(&chosen, algo, sizeof chosen);
    } else {
        /* guide, cublasLtMatmul(): with algo NULL "an implicit heuristics query with default
         * search preferences will be performed". */
        lt_pref defaults = {0, 0, 256, 256, 256, 256};
        if ((st = lt_choose_algo(op, la, lb, lc, ld, &defaults, &chosen)) != CUBLAS_STATUS_SUCCESS) return st;
    }
    p.alpha = *(const float *)alpha, p.beta = *(const float *)beta;
    if (p.beta == 0.0f) C = NULL; /* not read, so its pointer is not checked either */
    else if (!C) return CUBLAS_STATUS_INVALID_VALUE;
    if ((st = lt_check_run(&chosen, op, la, lb, lc, ld, A, B, C, D, workspace, workspaceSizeInBytes)) !=
        CUBLAS_STATUS_SUCCESS)
        return st;

    lt_job *j = (lt_job *)calloc(1, sizeof *j);
    if (!j) return CUBLAS_STATUS_ALLOC_FAILED;
    j->op = *op, j->la = *la, j->lb = *lb, j->lc = *lc, j->ld = *ld;
    p.op = &j->op, p.la = &j->la, p.lb = &j->lb, p.lc = &j->lc, p.ld = &j->ld, p.batch = ld->batch;
    p.trans_a = op->transa != CUBLAS_OP_N, p.trans_b = op->transb != CUBLAS_OP_N;
    p.A = A, p.B = B, p.C = C, p.D = D;
    const int epi = lt_epilogue_bits(op->epilogue);
    p.bias = (epi & LT_EPI_BIAS) ? op->bias : NULL;
    p.aux = (epi & (LT_EPI_AUX_OUT | LT_EPI_DGELU)) ? op->aux : NULL;
    const uint64_t need = lt_scratch_bytes(la->type, p.m, p.n, p.k);
    if (need && chosen.workspace >= need) {
        p.scratch = (float *)workspace;
    } else if (need) { /* an algorithm without (enough) workspace keeps its scratch to itself */
        if (!(j->own = malloc((size_t)need))) {
            free(j);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
        p.scratch = (float *)j->own;
    }
    if (epi & LT_EPI_BGRAD) {
        if (!(j->bgrad = (float *)calloc((size_t)p.m, sizeof *j->bgrad))) {
            free(j->own);
            free(j);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
        p.bgrad = j->bgrad;
    }
    j->p = p;
    cudacpu_launch_host_fn launch = cudacpu_host_launcher();
    if (!launch) {
        run_job(j);
    } else if (launch(stream, run_job, j) != 0) { /* cudaSuccess is 0; a bad stream handle */
        free(j->own);
        free(j->bgrad);
        free(j);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
