/* gelu_impl.h — the body of gelu.c over REAL, instantiated for float and double. The
 * element loops are spans of GELU_SPAN elements, each span one vectorised call (compiled
 * for AVX-512, AVX2 and the baseline, see fast_math.h), the spans shared among threads.
 * KFN(gelu_one_plus_erf) and KFN(gelu_deriv) are gelu.c's per-type 1 + erf and GELU derivative
 * (vectorisable for float, libm for the double reference). */

/* ------------------------------------------------------------ spans */

TR_SIMD_CLONES static void KFN(gelu_fwd_span)(REAL *out, const REAL *x, int64_t n, int approx)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    const REAL k = (REAL)0.79788456080286535588;    /* sqrt(2/pi) */
    const REAL c = (REAL)0.044715;
    if (approx == TR_GELU_TANH) {
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            out[i] = (REAL)0.5 * v * (1 + tanh(k * (v + c * v * v * v)));
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            out[i] = (REAL)0.5 * v * KFN(gelu_one_plus_erf)(v * inv_sqrt2);
        }
    }
}

TR_SIMD_CLONES static void KFN(gelu_bwd_span)(REAL *dx, const REAL *dout, const REAL *x, int64_t n, int approx)
{
    const REAL k = (REAL)0.79788456080286535588;
    const REAL c = (REAL)0.044715;
    if (approx == TR_GELU_TANH) {
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            REAL t = tanh(k * (v + c * v * v * v));
            REAL d = (REAL)0.5 * (1 + t) + (REAL)0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
            dx[i] = dout[i] * d;
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            dx[i] = dout[i] * KFN(gelu_deriv)(v);
        }
    }
}

/* ------------------------------------------------------------ forward */

void KFN(tr_k_gelu_fwd)(REAL *out, const REAL *x, int64_t n, int approx)
{
    if (n <= 65536) {   /* no OpenMP region: even an if(0) one makes a libgomp team */
        KFN(gelu_fwd_span)(out, x, n, approx);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_SPAN)
        KFN(gelu_fwd_span)(out + b, x + b, n - b < GELU_SPAN ? n - b : GELU_SPAN, approx);
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_gelu_bwd)(REAL *dx, const REAL *dout, const REAL *x, int64_t n, int approx)
{
    if (n <= 65536) {   /* no OpenMP region: even an if(0) one makes a libgomp team */
        KFN(gelu_bwd_span)(dx, dout, x, n, approx);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += GELU_SPAN)
        KFN(gelu_bwd_span)(dx + b, dout + b, x + b, n - b < GELU_SPAN ? n - b : GELU_SPAN, approx);
}
