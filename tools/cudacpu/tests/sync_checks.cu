/* sync_checks.cu (cudacpu tests) — the scheduler's checks, each a deliberately broken kernel
 * that must be flagged beside its correct twin that must pass: a missing __syncthreads in a
 * block reduction (exposed by warprev), barriers some threads never reach, shuffles some lanes
 * do not reach, a lane calling a collective with its own bit clear, a shuffle reading a lane
 * outside its mask, and a race that only one schedule order exposes. */
#include "check.h"

#include <cmath>

static const int N = 256; /* threads per block: 8 warps */

/* ------------------------------------------------------------ block reductions */

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Mean and mean square of a row through one red[] reused by both sums: the second sum must
 * not overwrite red[] before warp 0 has read the first (the barrier at the end of
 * block_sum). Without it, a warp that runs ahead (warprev) writes its second partial into
 * red[] while warp 0 still reads the first. */
template <bool SYNC_AFTER_READ> __device__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) red[w] = v;
    __syncthreads();
    float t = lane < (int)(blockDim.x / 32) ? red[lane] : 0.0f;
    t = warp_sum(t);
    if (SYNC_AFTER_READ) __syncthreads();
    return t;
}

template <bool SYNC_AFTER_READ> __global__ void moments_kernel(float *out, const float *x)
{
    __shared__ float red[32];
    const float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    const float s1 = block_sum<SYNC_AFTER_READ>(v, red);
    const float s2 = block_sum<SYNC_AFTER_READ>(v * v, red);
    if (threadIdx.x == 0) out[2 * blockIdx.x] = s1, out[2 * blockIdx.x + 1] = s2;
}

template <bool SYNC> static void run_moments(bool expect_right)
{
    const int B = 4;
    float hx[B * N], hout[2 * B];
    for (int i = 0; i < B * N; i++) hx[i] = (float)(i % 7) - (float)(i % 3); /* small integers: exact sums */
    float *x, *out;
    CUDA_OK(cudaMalloc((void **)&x, sizeof hx));
    CUDA_OK(cudaMalloc((void **)&out, sizeof hout));
    CUDA_OK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
    moments_kernel<SYNC><<<B, N>>>(out, x);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost));
    bool right = true;
    for (int b = 0; b < B; b++) {
        float s1 = 0, s2 = 0;
        for (int i = 0; i < N; i++) s1 += hx[b * N + i], s2 += hx[b * N + i] * hx[b * N + i];
        right = right && hout[2 * b] == s1 && hout[2 * b + 1] == s2;
    }
    CHECK(right == expect_right, "block sums %s under %s (block 0: %g %g)", right ? "right" : "wrong",
          env_or("CUDACPU_SCHEDULE", "fwd"), hout[0], hout[1]);
    free_device({ x, out });
}

/* flagged under warprev (a wrong sum); fwd runs warps in lockstep rounds and hides it */
static void missing_syncthreads() { run_moments<false>(!env_is("CUDACPU_SCHEDULE", "fwd", "warprev")); }
static void missing_syncthreads_twin() { run_moments<true>(true); }

/* ------------------------------------------------------------ barriers not all threads reach */

static const int LINE_HALF_BAR = __LINE__ + 6;
static const int LINE_HALF_SHFL = __LINE__ + 7;
__global__ void half_barrier_kernel(float *out)
{
    float v = (float)threadIdx.x;
    if (threadIdx.x % 32 < 16)
        __syncthreads();
    else
        v = __shfl_sync(0xffffffffu, v, 0);
    out[threadIdx.x] = v;
}

static const int LINE_DIV_A = __LINE__ + 5;
static const int LINE_DIV_B = __LINE__ + 6;
__global__ void barrier_divergence_kernel(float *out)
{
    if (threadIdx.x < 64)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void early_exit_kernel(float *out, int twin)
{
    if (!twin && threadIdx.x >= 16) return;
    __syncthreads();
    if (threadIdx.x < 16) out[threadIdx.x] = 1.0f;
}

__global__ void full_barrier_kernel(float *out)
{
    __shared__ float sh[N];
    sh[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = sh[N - 1 - threadIdx.x];
}

static float *scratch()
{
    static float *p;
    if (!p) CUDA_OK(cudaMalloc((void **)&p, 4 * N * sizeof(float)));
    return p;
}

static void barrier_deadlock()
{
    half_barrier_kernel<<<2, N>>>(scratch());
    const char *want[] = {"kernel half_barrier_kernel", "deadlock", at_line(__FILE__, LINE_HALF_BAR),
                          at_line(__FILE__, LINE_HALF_SHFL), "in block (0,0,0)"};
    expect_failure(cudaGetLastError(), want, 5);
}

static void barrier_divergence()
{
    barrier_divergence_kernel<<<1, N>>>(scratch());
    const char *want[] = {"barrier divergence", at_line(__FILE__, LINE_DIV_A), at_line(__FILE__, LINE_DIV_B)};
    expect_failure(cudaGetLastError(), want, 3);
}

/* CUDACPU_STRICT_EXIT=0 counts exited threads as arrived, as the hardware does */
static void barrier_exited()
{
    early_exit_kernel<<<1, N>>>(scratch(), 0);
    if (env_is("CUDACPU_STRICT_EXIT", "1", "0")) {
        CUDA_OK(cudaGetLastError());
        return;
    }
    const char *want[] = {"barrier with exited threads", "(thread 16)"};
    expect_failure(cudaGetLastError(), want, 2);
}

static void barrier_twin()
{
    float h[N];
    full_barrier_kernel<<<3, N>>>(scratch());
    CUDA_OK(cudaGetLastError());
    early_exit_kernel<<<1, N>>>(scratch() + N, 1);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h, scratch(), sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) CHECK(h[i] == (float)(N - 1 - i), "out[%d] = %g", i, h[i]);
}

/* ------------------------------------------------------------ warp collectives */

static const int LINE_SHFL_A = __LINE__ + 6;
static const int LINE_SHFL_B = __LINE__ + 7;
__global__ void diverged_shuffle_kernel(float *out)
{
    float v = (float)threadIdx.x;
    if (threadIdx.x % 32 < 16)
        v = __shfl_xor_sync(0xffffffffu, v, 1);
    else
        v = __shfl_xor_sync(0xffffffffu, v, 2);
    out[threadIdx.x] = v;
}

static const int LINE_OWN_BIT = __LINE__ + 4;
__global__ void own_bit_kernel(float *out)
{
    float v = (float)threadIdx.x;
    v = __shfl_sync(0x0000ffffu, v, 0);
    out[threadIdx.x] = v;
}

/* lanes 0-15 shuffle among themselves, but lanes 8-15 read 16-23 */
__global__ void outside_mask_kernel(float *out, int delta)
{
    float v = (float)threadIdx.x;
    if (threadIdx.x % 32 < 16) v = __shfl_down_sync(0x0000ffffu, v, delta, 16);
    out[threadIdx.x] = v;
}
__global__ void outside_mask_wide_kernel(float *out)
{
    float v = (float)threadIdx.x;
    if (threadIdx.x % 32 < 16) v = __shfl_down_sync(0x0000ffffu, v, 8);
    out[threadIdx.x] = v;
}

__global__ void vote_kernel(unsigned *out)
{
    const int lane = threadIdx.x % 32;
    const unsigned b = __ballot_sync(0xffffffffu, lane % 3 == 0);
    const int any = __any_sync(0xffffffffu, lane == 31), all = __all_sync(0xffffffffu, lane < 32);
    const float s = warp_sum(1.0f);
    unsigned up = (unsigned)__shfl_up_sync(0xffffffffu, lane, 1), idx = (unsigned)__shfl_sync(0xffffffffu, lane, 5);
    __syncwarp();
    if (lane == 0) out[threadIdx.x / 32] = b ^ (unsigned)any ^ ((unsigned)all << 1) ^ ((unsigned)s << 8);
    out[64 + threadIdx.x] = up * 100 + idx;
}

static void shuffle_divergence()
{
    diverged_shuffle_kernel<<<1, N>>>(scratch());
    const char *want[] = {"diverged", at_line(__FILE__, LINE_SHFL_A), at_line(__FILE__, LINE_SHFL_B)};
    expect_failure(cudaGetLastError(), want, 3);
}

static void own_bit_clear()
{
    own_bit_kernel<<<1, 64>>>(scratch());
    const char *want[] = {"(lane 16)", "own bit clear", at_line(__FILE__, LINE_OWN_BIT)};
    expect_failure(cudaGetLastError(), want, 3);
}

static void outside_mask()
{
    outside_mask_wide_kernel<<<1, 32>>>(scratch());
    const char *want[] = {"reads lane 16, which is not in the mask"};
    expect_failure(cudaGetLastError(), want, 1);
}

static void collectives_twin()
{
    float h[32];
    outside_mask_kernel<<<1, 32>>>(scratch(), 4); /* width 16: lanes 12-15 keep their own value */
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h, scratch(), sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++) CHECK(h[i] == (float)(i + 4 < 16 ? i + 4 : i), "lane %d got %g", i, h[i]);
    unsigned u[64 + N];
    vote_kernel<<<1, N>>>((unsigned *)scratch());
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(u, scratch(), sizeof u, cudaMemcpyDeviceToHost));
    unsigned ballot = 0;
    for (int l = 0; l < 32; l++) ballot |= (unsigned)(l % 3 == 0) << l;
    for (int w = 0; w < N / 32; w++)
        CHECK(u[w] == (ballot ^ 1u ^ 2u ^ (32u << 8)), "warp %d votes 0x%08x", w, u[w]);
    for (int t = 0; t < N; t++) {
        const unsigned lane = t % 32;
        CHECK(u[64 + t] == (lane ? lane - 1 : 0) * 100 + 5, "thread %d shuffles to %u", t, u[64 + t]);
    }
}

/* ------------------------------------------------------------ a race one order exposes */

/* each thread but a warp's first reads its left neighbour's slot, without a barrier: the
 * orders that run a warp's lanes ascending (fwd, warpfwd, warprev) have run the neighbour
 * first; rev (and rand) have not, and the slot still holds poison */
template <bool SYNC> __global__ void neighbour_kernel(float *out)
{
    __shared__ float sh[N];
    sh[threadIdx.x] = (float)threadIdx.x;
    if (SYNC) __syncthreads();
    out[threadIdx.x] = threadIdx.x % 32 ? sh[threadIdx.x - 1] : -1.0f;
}

template <bool SYNC> static bool neighbours_right()
{
    float h[N];
    neighbour_kernel<SYNC><<<2, N>>>(scratch());
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h, scratch(), sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        if (h[i] != (i % 32 ? (float)(i - 1) : -1.0f)) return false;
    return true;
}

/* wrong under rev and rand only: each order misses some races, so run at least two */
static void race_one_order()
{
    const char *order = env_or("CUDACPU_SCHEDULE", "fwd");
    const bool right = neighbours_right<false>();
    const bool exposed = !strcmp(order, "rev") || !strcmp(order, "rand");
    CHECK(right != exposed, "the race's result is %s under %s", right ? "right" : "wrong", order);
}
static void race_twin() { CHECK(neighbours_right<true>(), "with the barrier the result is wrong"); }

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"missing_syncthreads", missing_syncthreads}, {"missing_syncthreads_twin", missing_syncthreads_twin},
        {"barrier_deadlock", barrier_deadlock},       {"barrier_divergence", barrier_divergence},
        {"barrier_exited", barrier_exited},           {"barrier_twin", barrier_twin},
        {"shuffle_divergence", shuffle_divergence},   {"own_bit_clear", own_bit_clear},
        {"outside_mask", outside_mask},               {"collectives_twin", collectives_twin},
        {"race_one_order", race_one_order},           {"race_twin", race_twin},
    };
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
