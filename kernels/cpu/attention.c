/* attention.c — instantiates attention_impl.h for float (attn_tile.h's micro-kernels on
 * AVX-512 or AVX2, cblas_sgemm on other CPUs) and double (cblas_dgemm: the tests' reference),
 * and the thread/scratch helpers. GEMM arguments here are derived from
 * positive shape ints checked at entry (every ld >= 1), so BLAS never rejects them; the
 * tensor-level op checks that B*T*H*D fits before calling. */
#include "cpu/attention.h"

#include <cblas.h>
#include <string.h>
#include <tgmath.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu/attn_short.h"
#include "cpu/attn_tile.h"
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

int64_t tr_k_attention_row_stride(int64_t T)
{
    return T > 0 ? (T + TR_ATTN_ROW_ALIGN - 1) / TR_ATTN_ROW_ALIGN * TR_ATTN_ROW_ALIGN : 0;
}

/* Per thread (attention_impl.h, attn_bufs_of): the block buffers S, G and the 32-bit keep
 * masks, TR_ATTN_BLOCK x Tp each; the packed k^T and v^T, D x Tp each; the key selects (Tp)
 * and the output row scales (TR_ATTN_BLOCK). */
size_t tr_k_attention_scratch_elems(int64_t T, int64_t D, int nthreads)
{
    size_t Tp = (size_t)tr_k_attention_row_stride(T), d = (size_t)(D > 0 ? D : 0);
    if (Tp == 0) return 0;
    size_t per = TR_ATTN_SCRATCH_BUFS * TR_ATTN_BLOCK * Tp + 2 * d * Tp + Tp + TR_ATTN_BLOCK;
    return (size_t)(nthreads > 0 ? nthreads : 1) * per;
}

/* The keep masks of rows [0, nb) of a block, stream elements offset .. offset + nb*T - 1,
 * laid out with the score rows' stride Tp and 0 in the padding columns: one draw into the
 * buffer's tail, then each row moved down to its place (row r's destination ends before row
 * r+1's source begins, since r+1 <= nb). */
static void attn_keep_block(uint32_t *keep, const tr_attn_dropout *drop, int64_t nb, int64_t T,
                            int64_t Tp, uint64_t offset)
{
    uint32_t *src = keep + nb * (Tp - T);
    drop->keep(src, (size_t)(nb * T), drop->p, drop->key, offset);
    if (Tp == T) return;
    for (int64_t r = 0; r < nb; r++) {
        memmove(keep + r * Tp, src + r * T, (size_t)T * sizeof *keep);
        memset(keep + r * Tp + T, 0, (size_t)(Tp - T) * sizeof *keep);
    }
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
#define KTILE 1
#include "cpu/attention_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef KEXP
#undef KCAP
#undef KTILE

#define REAL double
#define KFN(n) n##_f64
#define GEMM cblas_dgemm
#define KEXP exp
#define KCAP(x, c) ((x) < (c) ? (x) : (c))
#define KTILE 0
#include "cpu/attention_impl.h"
#undef REAL
#undef KFN
#undef GEMM
#undef KEXP
#undef KCAP
#undef KTILE
