/* counters.cu (cudacpu tests) — cudacpu_counts() after a known sequence of calls: every field
 * exact, the same in both stream modes (a counter counts calls, not when work ran); and
 * cudacpu_counts_reset() sets them all to 0. */
#include "check.h"

__global__ void sum_kernel(float *out, const float *in)
{
    __shared__ float red[64];
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    red[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = red[0] + red[32];
}

#define EXPECT(field, value) CHECK(c.field == (value), "%s = %llu, want %llu", #field, c.field, (unsigned long long)(value))

static void exact_counts()
{
    const int n = 256;
    cudacpu_counts_reset();
    float *a, *b, *pin, host[256];
    for (int i = 0; i < n; i++) host[i] = 1.0f;
    CUDA_OK(cudaMalloc((void **)&a, n * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&b, n * sizeof(float)));
    CUDA_OK(cudaHostAlloc((void **)&pin, n * sizeof(float), cudaHostAllocDefault));
    cudaStream_t s;
    cudaEvent_t e;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&e));
    CUDA_OK(cudaMemcpy(a, host, n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpyAsync(a, host, n * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemset(b, 0, n * sizeof(float)));
    CUDA_OK(cudaMemsetAsync(b, 0, n * sizeof(float), s));
    sum_kernel<<<4, 64, 0, s>>>(b, a);  /* 4 blocks x 64 threads: 4 barriers, 8 shuffles */
    sum_kernel<<<1, 64>>>(b + 8, a);
    sum_kernel<<<1, 2000>>>(b, a);      /* invalid: not counted as a launch */
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "the invalid launch was accepted");
    CUDA_OK(cudaMemcpyAsync(b + 16, a, 16 * sizeof(float), cudaMemcpyDeviceToDevice, s));
    CUDA_OK(cudaEventRecord(e, s));
    CUDA_OK(cudaStreamWaitEvent(nullptr, e, 0));
    CUDA_OK(cudaMemcpyAsync(pin, b, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(host, b, n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(host, b, 4 * sizeof(float), cudaMemcpyDefault)); /* resolved as D2H */
    CUDA_OK(cudaEventSynchronize(e));
    CUDA_OK(cudaEventQuery(e));
    CUDA_OK(cudaStreamSynchronize(nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(host[0] == 4.0f && host[1] == 4.0f && host[2] == 4.0f, "sums %g %g %g", host[0], host[1], host[2]);
    CUDA_OK(cudaEventDestroy(e));
    CUDA_OK(cudaStreamDestroy(s));
    free_device({ a, b, nullptr });
    CUDA_OK(cudaFreeHost(pin));
    cudacpu_counters c;
    cudacpu_counts(&c);
    EXPECT(kernels, 2);
    EXPECT(kernels_run, 2);
    EXPECT(kernels_failed, 0);
    EXPECT(blocks, 5);
    EXPECT(threads, 5 * 64);
    EXPECT(barriers, 5);
    EXPECT(warp_collectives, 10);
    EXPECT(copies_h2d, 2);
    EXPECT(copies_d2h, 3);
    EXPECT(copies_d2d, 1);
    EXPECT(copies_h2h, 0);
    EXPECT(bytes_h2d, 2 * n * sizeof(float));
    EXPECT(bytes_d2h, (2 * n + 4) * sizeof(float));
    EXPECT(bytes_d2d, 16 * sizeof(float));
    EXPECT(memsets, 2);
    EXPECT(stream_syncs, 2);
    EXPECT(stream_queries, 0);
    EXPECT(event_records, 1);
    EXPECT(event_syncs, 1);
    EXPECT(event_queries, 1);
    EXPECT(stream_waits, 1);
    EXPECT(device_syncs, 1);
    EXPECT(mallocs, 2);
    EXPECT(frees, 3);
    EXPECT(host_allocs, 1);
    EXPECT(host_frees, 1);
    CHECK(cudacpu_kernels_run() == 2, "cudacpu_kernels_run() = %llu", cudacpu_kernels_run());
}

static void reset()
{
    float *a;
    CUDA_OK(cudaMalloc((void **)&a, 64 * sizeof(float)));
    sum_kernel<<<1, 64>>>(a, a);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaFree(a));
    cudacpu_counts_reset();
    cudacpu_counters c;
    memset(&c, 0xab, sizeof c);
    cudacpu_counts(&c);
    const unsigned long long *f = (const unsigned long long *)&c;
    for (size_t i = 0; i < sizeof c / sizeof *f; i++) CHECK(f[i] == 0, "field %zu is %llu after the reset", i, f[i]);
    CHECK(cudacpu_kernels_run() == 1, "cudacpu_kernels_run() was reset");
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {{"exact_counts", exact_counts}, {"reset", reset}};
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
