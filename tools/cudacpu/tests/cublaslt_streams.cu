/* cublaslt_streams.cu (cudacpu tests) — the cuBLASLt stand-in's products keep their stream's
 * order: a product queued after its operands' uploads reads the uploaded values even when its
 * descriptors are destroyed before the stream runs; under CUDACPU_STREAMS=deferred a product
 * read back on another stream without a wait is stale (zeros), with the wait it is right.
 * The program links libcublasLt and exports the runtime's symbols, as the project's do. */
#include "check.h"

#include <cublasLt.h>

static const int M = 8; /* D (M x M) = A (M x M) * B (M x M), column-major f32 */

#define LT_OK(call)                                                                                          \
    do {                                                                                                     \
        cublasStatus_t s_ = (call);                                                                          \
        CHECK(s_ == CUBLAS_STATUS_SUCCESS, "%s returned status %d", #call, (int)s_);                         \
    } while (0)

static bool deferred() { return env_is("CUDACPU_STREAMS", "sync", "deferred"); }

/* D = A * B on `on`, the descriptors destroyed as soon as the call returns */
static void matmul(cublasLtHandle_t lt, float *d, const float *a, const float *b, cudaStream_t on)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    LT_OK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, M, M));
    LT_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, M, M, M));
    LT_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, M, M));
    const float one = 1.0f, zero = 0.0f;
    LT_OK(cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, on));
    LT_OK(cublasLtMatrixLayoutDestroy(ld));
    LT_OK(cublasLtMatrixLayoutDestroy(lb));
    LT_OK(cublasLtMatrixLayoutDestroy(la));
    LT_OK(cublasLtMatmulDescDestroy(op));
}

/* A = 1..M*M, B = 2 I uploaded and multiplied on one stream; D read back on `reader`, after a
 * wait for the product when `wait`. Returns D's last element (2 * M * M when D is right). */
static float product_read_on(bool same_stream, bool wait)
{
    static float a[M * M], b[M * M];
    for (int i = 0; i < M * M; i++) a[i] = (float)(i + 1), b[i] = (i % (M + 1)) == 0 ? 2.0f : 0.0f;
    float *da, *db, *dd, h[M * M];
    CUDA_OK(cudaMalloc((void **)&da, sizeof a));
    CUDA_OK(cudaMalloc((void **)&db, sizeof b));
    CUDA_OK(cudaMalloc((void **)&dd, sizeof a));
    CUDA_OK(cudaMemset(dd, 0, sizeof a));
    CUDA_OK(cudaDeviceSynchronize());
    cublasLtHandle_t lt;
    LT_OK(cublasLtCreate(&lt));
    cudaStream_t compute, reader;
    cudaEvent_t done;
    new_streams({ &compute, &reader });
    CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_OK(cudaMemcpyAsync(da, a, sizeof a, cudaMemcpyHostToDevice, compute));
    CUDA_OK(cudaMemcpyAsync(db, b, sizeof b, cudaMemcpyHostToDevice, compute));
    matmul(lt, dd, da, db, compute);
    CUDA_OK(cudaEventRecord(done, compute));
    cudaStream_t from = same_stream ? compute : reader;
    if (wait) CUDA_OK(cudaStreamWaitEvent(from, done, 0));
    CUDA_OK(cudaMemcpyAsync(h, dd, sizeof h, cudaMemcpyDeviceToHost, from)); /* pageable: returns when done */
    CUDA_OK(cudaStreamSynchronize(from));
    const float got = h[M * M - 1];
    CUDA_OK(cudaStreamSynchronize(compute));
    LT_OK(cublasLtDestroy(lt));
    CUDA_OK(cudaEventDestroy(done));
    destroy_streams({ compute, reader });
    free_device({ da, db, dd });
    return got;
}

static void in_stream_order()
{
    const float got = product_read_on(true, false);
    CHECK(got == 2.0f * M * M, "the product read %g, not the uploaded operands' %g", got, 2.0f * M * M);
}

static void missing_wait()
{
    const float got = product_read_on(false, false);
    const float want = deferred() ? 0.0f : 2.0f * M * M;
    CHECK(got == want, "without the wait the reading stream saw %g (want %g)", got, want);
}

static void missing_wait_twin()
{
    const float got = product_read_on(false, true);
    CHECK(got == 2.0f * M * M, "with the wait the reading stream saw %g", got);
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"in_stream_order", in_stream_order},
        {"missing_wait", missing_wait},
        {"missing_wait_twin", missing_wait_twin},
    };
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
