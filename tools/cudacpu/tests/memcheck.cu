/* memcheck.cu (cudacpu tests) — built with ASan + UBSan against libcudart_asan.a: an
 * out-of-bounds write by a kernel into a cudaMalloc'd buffer is reported by ASan as a
 * heap-buffer-overflow naming the kernel; the in-bounds twin runs clean, through many blocks
 * of threads with stack arrays and through a launch that fails mid-block (fiber stacks are
 * switched and reused under ASan without false reports). */
#include "check.h"

static const int N = 256;

__global__ void fill_kernel(float *out, int n, int extra)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra) out[i] = (float)i; /* extra > 0: the last block writes past the end */
}

/* a stack array per thread, and shuffles and barriers, so fibers switch mid-frame */
__global__ void stack_kernel(float *out)
{
    float local[64];
    for (int k = 0; k < 64; k++) local[k] = (float)(threadIdx.x + k);
    float v = local[threadIdx.x % 64];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = v + local[63 - threadIdx.x % 64];
}

/* fails in its first block, its threads abandoned mid-frame: the warp's halves shuffle at
 * different call sites */
__global__ void broken_kernel(float *out)
{
    float local[32];
    local[threadIdx.x % 32] = 1.0f;
    float v = local[threadIdx.x % 32];
    if (threadIdx.x % 32 < 16)
        v = __shfl_xor_sync(0xffffffffu, v, 1);
    else
        v = __shfl_xor_sync(0xffffffffu, v, 2);
    out[threadIdx.x] = v;
}

static void out_of_bounds_write()
{
    const int n = 1000;
    float *d;
    CUDA_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    fill_kernel<<<(n + 1 + N - 1) / N, N>>>(d, n, 1);
    (void)cudaDeviceSynchronize();
    printf("why: the out-of-bounds write was not reported\n");
    exit(1);
}

static void in_bounds_twin()
{
    const int n = 1000, B = 64;
    float *d, *s;
    CUDA_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&s, B * N * sizeof(float)));
    fill_kernel<<<(n + N - 1) / N, N>>>(d, n, 0);
    CUDA_OK(cudaGetLastError());
    for (int r = 0; r < 3; r++) {
        stack_kernel<<<B, N>>>(s);
        CUDA_OK(cudaGetLastError());
        broken_kernel<<<2, 64>>>(s);
        CHECK(cudaGetLastError() == cudaErrorLaunchFailure, "the broken launch did not fail");
    }
    stack_kernel<<<B, N>>>(s);
    CUDA_OK(cudaGetLastError());
    static float h[64 * N];
    CUDA_OK(cudaMemcpy(h, s, sizeof h, cudaMemcpyDeviceToHost));
    for (int t = 0; t < N; t++) {
        float want = 0;
        for (int l = 0; l < 32; l++) want += (float)((t / 32 * 32 + l) + (t / 32 * 32 + l) % 64);
        want += (float)(t + 63 - t % 64);
        CHECK(h[t] == want, "thread %d: %g, want %g", t, h[t], want);
    }
    free_device({ d, s });
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"out_of_bounds_write", out_of_bounds_write},
        {"in_bounds_twin", in_bounds_twin},
    };
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
