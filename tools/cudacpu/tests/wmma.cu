/* wmma.cu (cudacpu tests) — the WMMA subset of mma.h: products of every operand type and
 * layout against a host reference, and the misuses it must flag: a kernel that assumes which
 * lane holds which element (wrong result under the scrambled mapping), one that writes
 * operand elements non-uniformly (mma_sync fails), a misaligned pointer, a WMMA call half a
 * warp reaches. Their twins: uniform element operations and the legal way to learn an
 * accumulator element's row (load a matrix whose values are their row numbers). Also the
 * launch log (cudacpu_launch_log), which counts each launch's WMMA products. */
#include "check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>

using namespace nvcuda;

enum { M = 32, N = 48, K = 64 }; /* whole 16 x 16 tiles: 2 x 3 outputs, 4 steps of k */

inline float to_f(float v) { return v; }
inline float to_f(__half v) { return __half2float(v); }
inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> T from_f(float v);
template <> __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* C = A B + C0 with one warp per 16 x 16 tile of C: A is M x K, B is K x N, each row or
 * column major as LA, LB say (ld the stored dimension); C0 and C row major, ld N. */
template <class T, class LA, class LB>
__global__ void product_kernel(float *c, const T *a, const T *b, const float *c0)
{
    const int w = threadIdx.x / 32, tm = w / (N / 16), tn = w % (N / 16);
    const bool arow = std::is_same<LA, wmma::row_major>::value, brow = std::is_same<LB, wmma::row_major>::value;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, c0 + tm * 16 * N + tn * 16, N, wmma::mem_row_major);
    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::load_matrix_sync(fa, arow ? a + tm * 16 * K + k0 : a + k0 * M + tm * 16, arow ? K : M);
        wmma::load_matrix_sync(fb, brow ? b + k0 * N + tn * 16 : b + tn * 16 * K + k0, brow ? N : K);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
}

template <class T> struct device_buffer {
    T *p = nullptr;
    explicit device_buffer(size_t n) { CUDA_OK(cudaMalloc((void **)&p, n * sizeof(T))); }
    ~device_buffer() { cudaFree(p); }
};

/* values k / 8 - 2 .. : exact in half and bf16, so the host sums are the device's exactly */
static float value_of(int i, int salt) { return (float)((i * 7 + salt * 3) % 33) / 8.0f - 2.0f; }

template <class T, class LA, class LB> static void check_product()
{
    const bool arow = std::is_same<LA, wmma::row_major>::value, brow = std::is_same<LB, wmma::row_major>::value;
    static T ha[M * K], hb[K * N];
    static float fa[M * K], fb[K * N], hc0[M * N], hc[M * N];
    for (int i = 0; i < M * K; i++) ha[i] = from_f<T>(value_of(i, 1)), fa[i] = to_f(ha[i]);
    for (int i = 0; i < K * N; i++) hb[i] = from_f<T>(value_of(i, 2)), fb[i] = to_f(hb[i]);
    for (int i = 0; i < M * N; i++) hc0[i] = value_of(i, 3);
    device_buffer<T> a(M * K), b(K * N);
    device_buffer<float> c0(M * N), c(M * N);
    CUDA_OK(cudaMemcpy(a.p, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b.p, hb, sizeof hb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c0.p, hc0, sizeof hc0, cudaMemcpyHostToDevice));
    product_kernel<T, LA, LB><<<1, 32 * (M / 16) * (N / 16)>>>(c.p, a.p, b.p, c0.p);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(hc, c.p, sizeof hc, cudaMemcpyDeviceToHost));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float want = hc0[i * N + j];
            for (int k = 0; k < K; k++) want += fa[arow ? i * K + k : k * M + i] * fb[brow ? k * N + j : j * K + k];
            CHECK(hc[i * N + j] == want, "C[%d][%d] = %g, want %g", i, j, hc[i * N + j], want);
        }
}

static void products()
{
    check_product<__half, wmma::row_major, wmma::row_major>();
    check_product<__half, wmma::row_major, wmma::col_major>();
    check_product<__half, wmma::col_major, wmma::row_major>();
    check_product<__nv_bfloat16, wmma::row_major, wmma::col_major>();
    check_product<__nv_bfloat16, wmma::col_major, wmma::col_major>();
}

/* ------------------------------------------------------------ element mapping */

/* out = 2 * row-scale(r) * (A B) for one 16 x 16 tile, scale[r] = r + 1. ASSUME: take element
 * i of lane l to be row l / 2 (one plausible layout, not the emulator's); otherwise learn each
 * element's row from a loaded matrix whose values are their row numbers. */
template <bool ASSUME> __global__ void row_scale_kernel(float *out, const __half *a, const __half *b)
{
    __shared__ float rows[16 * 16];
    const int lane = threadIdx.x;
    for (int e = lane; e < 256; e += 32) rows[e] = (float)(e / 16);
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, row_of;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::load_matrix_sync(row_of, rows, 16, wmma::mem_row_major);
    for (int i = 0; i < acc.num_elements; i++) {
        const int r = ASSUME ? lane / 2 : (int)row_of.x[i];
        acc.x[i] *= 2.0f * (float)(r + 1); /* the uniform factor 2, the row's factor r + 1 */
    }
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

template <bool ASSUME> static bool row_scale_right()
{
    __half ha[256], hb[256];
    float fa[256], fb[256], hout[256];
    for (int i = 0; i < 256; i++) {
        ha[i] = __float2half_rn(value_of(i, 4)), fa[i] = __half2float(ha[i]);
        hb[i] = __float2half_rn(value_of(i, 5)), fb[i] = __half2float(hb[i]);
    }
    device_buffer<__half> a(256), b(256);
    device_buffer<float> out(256);
    CUDA_OK(cudaMemcpy(a.p, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b.p, hb, sizeof hb, cudaMemcpyHostToDevice));
    row_scale_kernel<ASSUME><<<1, 32>>>(out.p, a.p, b.p);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(hout, out.p, sizeof hout, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = 0;
            for (int k = 0; k < 16; k++) s += fa[i * 16 + k] * fb[k * 16 + j];
            wrong += hout[i * 16 + j] != 2.0f * (float)(i + 1) * s;
        }
    return wrong == 0;
}
static void assumed_layout() { CHECK(!row_scale_right<true>(), "a kernel assuming lane l holds row l / 2 was right"); }
static void learned_rows_twin() { CHECK(row_scale_right<false>(), "scaling by rows learned from a loaded matrix failed"); }

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> tile_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> tile_b;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> tile_acc;

/* out = a' b + c0, one 16 x 16 tile; touch(a) changes the loaded a (to a') first. */
template <class TOUCH> __device__ void one_tile(float *out, const __half *a, const __half *b, float c0, TOUCH touch)
{
    tile_a fa;
    tile_b fb;
    tile_acc acc;
    wmma::fill_fragment(acc, c0);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    touch(fa);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

/* Zeroes the first half of lane 0's matrix_a elements (as if they were known to be one row's)
 * before the product: the two copies of those elements differ. */
__global__ void nonuniform_kernel(float *out, const __half *a, const __half *b)
{
    one_tile(out, a, b, 0.0f, [](tile_a &fa) {
        if (threadIdx.x == 0)
            for (int i = 0; i < 8; i++) fa.x[i] = __float2half_rn(0.0f);
    });
}

/* Every element of the operands written alike (scaled by 0.5): the copies agree. */
__global__ void uniform_kernel(float *out, const __half *a, const __half *b)
{
    one_tile(out, a, b, 1.0f, [](tile_a &fa) {
        for (int i = 0; i < fa.num_elements; i++) fa.x[i] = __float2half_rn(0.5f * __half2float(fa.x[i]));
    });
}

template <class KERNEL> static cudaError_t run_tile(KERNEL kernel, int threads, int a_offset, float *hout)
{
    __half h[256 + 16];
    for (int i = 0; i < 256 + 16; i++) h[i] = __float2half_rn(value_of(i, 6));
    device_buffer<__half> a(256 + 16), b(256);
    device_buffer<float> out(256);
    CUDA_OK(cudaMemcpy(a.p, h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b.p, h, 256 * sizeof(__half), cudaMemcpyHostToDevice));
    kernel<<<1, threads>>>(out.p, a.p + a_offset, b.p);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess && hout) CUDA_OK(cudaMemcpy(hout, out.p, 256 * sizeof(float), cudaMemcpyDeviceToHost));
    return e;
}

static void nonuniform_write()
{
    static const char *const texts[] = {"two copies of an element of matrix_a differ", "wmma.cu:"};
    expect_failure(run_tile(nonuniform_kernel, 32, 0, nullptr), texts, 2);
}
static void uniform_twin()
{
    float out[256];
    CUDA_OK(run_tile(uniform_kernel, 32, 0, out));
    __half h[256];
    float f[256];
    for (int i = 0; i < 256; i++) h[i] = __float2half_rn(value_of(i, 6)), f[i] = __half2float(h[i]);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = 1.0f;
            for (int k = 0; k < 16; k++) s += __half2float(__float2half_rn(0.5f * f[i * 16 + k])) * f[k * 16 + j];
            CHECK(out[i * 16 + j] == s, "out[%d][%d] = %g, want %g", i, j, out[i * 16 + j], s);
        }
}

/* a + 4 halves: 8 bytes past a 32-byte boundary */
static void misaligned()
{
    static const char *const texts[] = {"wmma::load_matrix_sync(matrix_a)", "32-byte aligned"};
    expect_failure(run_tile(uniform_kernel, 32, 4, nullptr), texts, 2);
}

/* Only lanes 0-15 reach the product. */
__global__ void half_warp_kernel(float *out, const __half *a, const __half *b)
{
    tile_a fa;
    tile_b fb;
    tile_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    if (threadIdx.x < 16) wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}
static void half_warp()
{
    static const char *const texts[] = {"warp 0 diverged", "wmma::mma_sync", "wmma::store_matrix_sync"};
    expect_failure(run_tile(half_warp_kernel, 32, 0, nullptr), texts, 3);
}
static void partial_warp()
{
    static const char *const texts[] = {"not whole warps"};
    expect_failure(run_tile(uniform_kernel, 48, 0, nullptr), texts, 1);
}

/* ------------------------------------------------------------ the launch log */

__global__ void plain_kernel(float *x) { x[threadIdx.x] = 1.0f; }

/* Two launches and a host function: their names, shapes and WMMA products, in submission
 * order, whatever the stream mode; nothing recorded before the log starts or after it stops. */
static void launch_log()
{
    device_buffer<__half> a(M * K), b(K * N);
    device_buffer<float> c0(M * N), c(M * N);
    CUDA_OK(cudaMemset(a.p, 0, M * K * sizeof(__half)));
    CUDA_OK(cudaMemset(b.p, 0, K * N * sizeof(__half)));
    CUDA_OK(cudaMemset(c0.p, 0, M * N * sizeof(float)));
    plain_kernel<<<1, 32>>>(c.p);
    cudacpu_launch_log(1);
    product_kernel<__half, wmma::row_major, wmma::row_major><<<1, 32 * (M / 16) * (N / 16)>>>(c.p, a.p, b.p, c0.p);
    plain_kernel<<<dim3(1, 2, 1), 64>>>(c.p);
    CUDA_OK(cudaLaunchHostFunc(nullptr, [](void *) {}, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    cudacpu_launch_log(0);
    plain_kernel<<<1, 32>>>(c.p);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(cudacpu_launch_log_count() == 3, "%d records", cudacpu_launch_log_count());
    cudacpu_launch r[3];
    for (int i = 0; i < 3; i++) CHECK(cudacpu_launch_log_get(i, &r[i]) == 1, "record %d", i);
    CHECK(cudacpu_launch_log_get(3, &r[0]) == 0, "a record past the end");
    CHECK(strstr(r[0].name, "product_kernel") && r[0].block_x == 192 && r[0].grid_x == 1, "%s", r[0].name);
    CHECK(r[0].mma_syncs == (unsigned long long)(M / 16) * (N / 16) * (K / 16), "%llu products", r[0].mma_syncs);
    CHECK(!strcmp(r[1].name, "plain_kernel") && r[1].grid_y == 2 && r[1].block_x == 64 && r[1].mma_syncs == 0,
          "%s grid y %u block %u, %llu products", r[1].name, r[1].grid_y, r[1].block_x, r[1].mma_syncs);
    CHECK(!strcmp(r[2].name, "cudaLaunchHostFunc"), "%s", r[2].name);
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"products", products},           {"assumed_layout", assumed_layout},
        {"learned_rows_twin", learned_rows_twin}, {"nonuniform_write", nonuniform_write},
        {"uniform_twin", uniform_twin},   {"misaligned", misaligned},
        {"half_warp", half_warp},         {"partial_warp", partial_warp},
        {"launch_log", launch_log},
    };
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
