/* shared_poison.cu (cudacpu tests) — shared memory is filled with 0xFF bytes at each block's
 * start (CUDACPU_SHARED_POISON=1, the default): a read of a slot the block never wrote is
 * NaN, even where an earlier block wrote it; with the poison off the earlier block's value
 * shows through, as it may on a GPU. Declarations in function templates, in inline device
 * functions and with several declarators are covered. */
#include "check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

static const int N = 128;

/* block 0 fills every slot; later blocks skip slot 7 but read it */
template <class T> __global__ void skip_one_kernel(float *out)
{
    __shared__ T sh[N], spare[2];
    if (blockIdx.x == 0 || threadIdx.x != 7) sh[threadIdx.x] = (T)threadIdx.x;
    if (threadIdx.x == 0) spare[0] = (T)0;
    __syncthreads();
    out[blockIdx.x * N + threadIdx.x] = (float)sh[(threadIdx.x + 7) % N] + (float)spare[0];
}

/* a __shared__ in an inline device function, read before this block writes it */
__device__ inline float stale_flag(int write)
{
    __shared__ float flag;
    const float before = flag;
    __syncthreads();
    if (write && threadIdx.x == 0) flag = 1.0f;
    __syncthreads();
    return before;
}

__global__ void flag_kernel(float *out) { out[blockIdx.x * N + threadIdx.x] = stale_flag(1); }

__global__ void half_kernel(unsigned short *out)
{
    __shared__ __half h[4];
    __shared__ __nv_bfloat16 b[4];
    out[threadIdx.x] = __half_as_ushort(h[threadIdx.x % 4]);
    out[N + threadIdx.x] = __bfloat16_as_ushort(b[threadIdx.x % 4]);
    __syncthreads();
}

static bool poison_on() { return env_is("CUDACPU_SHARED_POISON", "1", "1"); }

template <class T> static void skip_one(bool twin)
{
    const int B = 3;
    float *d, h[B * N];
    CUDA_OK(cudaMalloc((void **)&d, sizeof h));
    skip_one_kernel<T><<<twin ? 1 : B, N>>>(d);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h, d, (twin ? 1 : B) * N * sizeof(float), cudaMemcpyDeviceToHost));
    for (int b = 0; b < (twin ? 1 : B); b++)
        for (int t = 0; t < N; t++) {
            const int slot = (t + 7) % N;
            const float v = h[b * N + t];
            if (b > 0 && slot == 7) {
                if (poison_on()) CHECK(std::isnan(v), "block %d read its unwritten slot as %g, not NaN", b, v);
                else CHECK(v == 7.0f, "poison off: block %d read %g, not block 0's 7", b, v);
            } else {
                CHECK(v == (float)slot, "block %d thread %d read %g", b, t, v);
            }
        }
    CUDA_OK(cudaFree(d));
}

static void unwritten_read_f32() { skip_one<float>(false); }
static void unwritten_read_f64() { skip_one<double>(false); }
static void written_twin() { skip_one<float>(true), skip_one<double>(true); }

static void inline_function()
{
    float *d, h[2 * N];
    CUDA_OK(cudaMalloc((void **)&d, sizeof h));
    flag_kernel<<<2, N>>>(d);
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    /* block 1 reads flag before writing it: NaN, or block 0's 1 without the poison */
    if (poison_on()) CHECK(std::isnan(h[N]), "block 1 read %g", h[N]);
    else CHECK(h[N] == 1.0f, "poison off: block 1 read %g", h[N]);
    CUDA_OK(cudaFree(d));
}

static void half_types()
{
    unsigned short *d, h[2 * N];
    CUDA_OK(cudaMalloc((void **)&d, sizeof h));
    half_kernel<<<1, N>>>(d);
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    if (!poison_on()) return;
    for (int i = 0; i < 2 * N; i++) CHECK(h[i] == 0xffffu, "slot %d holds 0x%04x, not a NaN pattern", i, h[i]);
    CHECK(std::isnan(__half2float(__ushort_as_half(h[0]))) && std::isnan(__bfloat162float(__ushort_as_bfloat16(h[N]))),
          "0xffff is not NaN in f16/bf16");
    CUDA_OK(cudaFree(d));
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"unwritten_read_f32", unwritten_read_f32}, {"unwritten_read_f64", unwritten_read_f64},
        {"written_twin", written_twin},             {"inline_function", inline_function},
        {"half_types", half_types},
    };
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
