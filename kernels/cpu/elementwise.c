/* elementwise.c — the elementwise kernels (elementwise.h), written once over REAL and
 * instantiated here for float (the runtime) and double (the tests' finite-difference
 * reference). */
#ifndef KFN
#include "cpu/elementwise.h"
#include "cpu/fast_math.h"

/* Elements per vectorised span call; the spans are what threads share. Up to ELEM_SERIAL
 * elements an op runs on the calling thread with no OpenMP region at all: `parallel for
 * if (0)` still makes and frees a libgomp team per call, and ops call these kernels per
 * chunk from inside their own parallel loops. */
enum { ELEM_SPAN = 16384, ELEM_SERIAL = 65536 };

#define KERNEL_IMPL "cpu/elementwise.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the elementwise kernels, written once over the scalar
 * type: the instantiation defines REAL (float or double) and KFN(name) (the suffixed
 * function name) and includes this file once per type.
 *
 * Shapes: a and out are [N, C]; b is [N, C] when b_rows == N, or a row vector [C]
 * broadcast over the N rows when b_rows == 1. */

/* ------------------------------------------------------------ spans */

/* The element loops as spans under `omp simd` in the AVX-512 / AVX2 clones (fast_math.h):
 * GCC -O2 vectorises a plain loop whose output may alias an input only with `omp simd`
 * (its cheap cost model refuses the runtime alias check), and a loop in a parallel region
 * only at the baseline SSE2 width. Elementwise, so every path gives the same bits. b_step
 * is 1 for a full b, 0 for a broadcast scalar. */
TR_SIMD_CLONES static void KFN(add_span)(REAL *out, const REAL *a, const REAL *b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

TR_SIMD_CLONES static void KFN(mul_span)(REAL *out, const REAL *a, const REAL *b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

TR_SIMD_CLONES static void KFN(scale_span)(REAL *out, const REAL *x, REAL alpha, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = alpha * x[i];
}

TR_SIMD_CLONES static void KFN(axpy_span)(REAL *y, const REAL *x, REAL alpha, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

TR_SIMD_CLONES static void KFN(fill_span)(REAL *out, REAL value, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = value;
}

static int64_t KFN(span_len)(int64_t n, int64_t s) { return n - s < ELEM_SPAN ? n - s : ELEM_SPAN; }

/* ------------------------------------------------------------ add, mul */

/* out = a OP b (=) by one span function: the whole of b when b_rows == N, else the row
 * vector b under each of the N rows. out may alias a or b. */
static void KFN(binary_fwd)(void (*span)(REAL *, const REAL *, const REAL *, int64_t), REAL *out, const REAL *a,
                            const REAL *b, int64_t N, int64_t C, int64_t b_rows)
{
    int64_t n = N * C;
    if (b_rows == N && n <= ELEM_SERIAL) {
        span(out, a, b, n);
        return;
    }
    if (b_rows == N) {
#pragma omp parallel for schedule(static)
        for (int64_t s = 0; s < n; s += ELEM_SPAN) span(out + s, a + s, b + s, KFN(span_len)(n, s));
        return;
    }
    if (n <= ELEM_SERIAL) {
        for (int64_t r = 0; r < N; r++) span(out + r * C, a + r * C, b, C);
        return;
    }
#pragma omp parallel for
    for (int64_t r = 0; r < N; r++) span(out + r * C, a + r * C, b, C);
}

/* out = a + b (=). out may alias a or b. */
void KFN(tr_k_add_fwd)(REAL *out, const REAL *a, const REAL *b, int64_t N, int64_t C, int64_t b_rows)
{
    KFN(binary_fwd)(KFN(add_span), out, a, b, N, C, b_rows);
}

/* out = a * b (=). out may alias a or b. */
void KFN(tr_k_mul_fwd)(REAL *out, const REAL *a, const REAL *b, int64_t N, int64_t C, int64_t b_rows)
{
    KFN(binary_fwd)(KFN(mul_span), out, a, b, N, C, b_rows);
}

/* da = dout * b (=), db = dout * a (=), summed over rows when b is broadcast.
 * Either gradient may be NULL (not wanted). Neither may alias dout, a or b. */
void KFN(tr_k_mul_bwd)(REAL *da, REAL *db, const REAL *dout, const REAL *a, const REAL *b,
                       int64_t N, int64_t C, int64_t b_rows)
{
    int64_t n = N * C;
    if (da) {
        if (b_rows == N) {
#pragma omp parallel for if (n > 65536) schedule(static)
            for (int64_t s = 0; s < n; s += ELEM_SPAN) KFN(mul_span)(da + s, dout + s, b + s, KFN(span_len)(n, s));
        } else {
#pragma omp parallel for if (n > 65536)
            for (int64_t r = 0; r < N; r++) KFN(mul_span)(da + r * C, dout + r * C, b, C);
        }
    }
    if (!db) return;
    if (b_rows == N) {
#pragma omp parallel for if (n > 65536) schedule(static)
        for (int64_t s = 0; s < n; s += ELEM_SPAN) KFN(mul_span)(db + s, dout + s, a + s, KFN(span_len)(n, s));
        return;
    }
    /* one thread per column: the row order of the sum is fixed, so results are deterministic */
#pragma omp parallel for if (n > 65536)
    for (int64_t c = 0; c < C; c++) {
        REAL s = 0;
        for (int64_t r = 0; r < N; r++) s += dout[r * C + c] * a[r * C + c];
        db[c] = s;
    }
}

/* ------------------------------------------------------------ scale, axpy, fill */

/* span(out, x, alpha) over n elements, in spans across threads above ELEM_SERIAL. */
static void KFN(alpha_fwd)(void (*span)(REAL *, const REAL *, REAL, int64_t), REAL *out, const REAL *x, REAL alpha,
                           int64_t n)
{
    if (n <= ELEM_SERIAL) {
        span(out, x, alpha, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < n; s += ELEM_SPAN) span(out + s, x + s, alpha, KFN(span_len)(n, s));
}

/* out = alpha * x (=). out may alias x. */
void KFN(tr_k_scale_fwd)(REAL *out, const REAL *x, REAL alpha, int64_t n)
{
    KFN(alpha_fwd)(KFN(scale_span), out, x, alpha, n);
}

/* y += alpha * x (ACCUMULATES into y). */
void KFN(tr_k_axpy_fwd)(REAL *y, const REAL *x, REAL alpha, int64_t n)
{
    KFN(alpha_fwd)(KFN(axpy_span), y, x, alpha, n);
}

/* out = value (=). */
void KFN(tr_k_fill_fwd)(REAL *out, REAL value, int64_t n)
{
    if (n <= ELEM_SERIAL) {
        KFN(fill_span)(out, value, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < n; s += ELEM_SPAN) KFN(fill_span)(out + s, value, KFN(span_len)(n, s));
}

#endif
