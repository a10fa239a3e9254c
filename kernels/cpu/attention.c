/* attention.c — instantiates attention_impl.h for float (cblas_sgemm) and double
 * (cblas_dgemm), and the thread/scratch helpers. GEMM arguments here are derived from
 * positive shape ints checked at entry (every ld >= 1), so BLAS never rejects them; the
 * tensor-level op checks that B*T*H*D fits before calling. */
#include "cpu/attention.h"

#include <cblas.h>
#include <string.h>
#include <tgmath.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tr_base.h"

/* ------------------------------------------------------------ helpers */

static int omp_thread(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int tr_k_attention_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The float uniforms are stored in the third buffer; a buffer of doubles holds them too. */
size_t tr_k_attention_scratch_elems(int64_t T, int nthreads)
{
    return (size_t)(nthreads > 0 ? nthreads : 1) * TR_ATTN_SCRATCH_BUFS * TR_ATTN_BLOCK *
           (size_t)(T > 0 ? T : 0);
}

/* OpenBLAS (pthread build) does not know it runs inside an OpenMP region and would
 * start its own threads for every block GEMM of every thread: measured 4x slower on 2
 * cores. The kernels run their GEMMs single-threaded inside their own parallel region and
 * restore the caller's BLAS thread count afterwards. This touches OpenBLAS's process-wide
 * setting, which is safe because ops run one at a time (the runtime calls them from one
 * thread). */
static int blas_single_begin(void)
{
    int prev = openblas_get_num_threads();
    if (prev != 1) openblas_set_num_threads(1);
    return prev;
}

static void blas_single_end(int prev)
{
    if (prev != 1) openblas_set_num_threads(prev);
}

/* exp for the float kernels, written so that `omp simd` loops vectorise it (libm's expf
 * is a call per element; exp is half the forward's time otherwise): Cody-Waite range
 * reduction x = n ln2 + r, |r| <= ln2/2, with n rounded by the 1.5 * 2^23 trick, then the
 * Cephes degree-6 polynomial for e^r (about 1 ulp) and 2^n assembled in the exponent bits.
 * Arguments below -87 (including -inf, padded keys) give exactly 0; arguments are <= ~0
 * here (scores minus their row maximum or log-sum-exp), so no overflow handling. The
 * clamp and the zeroing are bit selects, not branches: GCC -O2 does not if-convert, and
 * a branch keeps the loop scalar. Max relative error 8.3e-8 over [-87, 1]. */
static inline float fast_expf(float x)
{
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float round_magic = 12582912.0f, lo = -87.0f;
    int32_t xi, loi, keep = -(int32_t)(x >= lo);    /* all ones when x >= -87, else 0 */
    memcpy(&xi, &x, sizeof xi);
    memcpy(&loi, &lo, sizeof loi);
    int32_t ci = (xi & keep) | (loi & ~keep);
    float xc;
    memcpy(&xc, &ci, sizeof xc);
    float nf = (xc * log2e + round_magic) - round_magic;
    float r = xc - nf * ln2_hi - nf * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)nf + 127) << 23;
    float scale, out;
    memcpy(&scale, &bits, sizeof scale);
    e *= scale;
    int32_t ei;
    memcpy(&ei, &e, sizeof ei);
    ei &= keep;
    memcpy(&out, &ei, sizeof out);
    return out;
}

static int key_kept(const void *mask, int mask_dtype, int64_t b, int64_t T, int64_t j)
{
    if (!mask) return 1;
    if (mask_dtype == TR_F32) return ((const float *)mask)[b * T + j] != 0;
    return ((const int32_t *)mask)[b * T + j] != 0;
}

/* ------------------------------------------------------------ instances */

#define REAL float
#define KFN(n) n##_f32
#define GEMM cblas_sgemm
#define KEXP fast_expf
#include "cpu/attention_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef KEXP

#define REAL double
#define KFN(n) n##_f64
#define GEMM cblas_dgemm
#define KEXP exp
#include "cpu/attention_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef KEXP
