/* bf16_fragment.cu (cudacpu tests) — compiled, not run: a kernel that names a bf16 WMMA
 * fragment compiles for sm_80 and up and fails to compile for an older target (CUDACPU_ARCH
 * 75 at build time), as nvcc refuses it; an f16 fragment compiles for both. run.sh builds it
 * with -DWITH_BF16 and without. */
#include <mma.h>

using namespace nvcuda;

__global__ void fragments_kernel(float *out)
{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a16;
    wmma::fill_fragment(a16, __float2half(1.0f));
#ifdef WITH_BF16
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::fill_fragment(a, __float2bfloat16(1.0f));
#endif
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}
