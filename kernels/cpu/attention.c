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

#include "cpu/fast_math.h"
#include "tr_base.h"

/* The unsigned integer as wide as each REAL, for attention_impl.h's dropout bit select. */
typedef uint32_t attn_bits_f32;
typedef uint64_t attn_bits_f64;

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

/* The 32-bit keep masks of a block are stored in the third buffer. */
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

/* ------------------------------------------------------------ instances */

#define REAL float
#define KFN(n) n##_f32
#define GEMM cblas_sgemm
#define KEXP tr_fast_expf
#define KCAP tr_fast_capf
#include "cpu/attention_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef KEXP
#undef KCAP

#define REAL double
#define KFN(n) n##_f64
#define GEMM cblas_dgemm
#define KEXP exp
#define KCAP(x, c) ((x) < (c) ? (x) : (c))
#include "cpu/attention_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef KEXP
#undef KCAP
