/* gelu_impl.h — the body of gelu.c over REAL, instantiated for float and double. */

/* ------------------------------------------------------------ forward */

void KFN(tr_k_gelu_fwd)(REAL *out, const REAL *x, int64_t n, int approx)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    const REAL k = (REAL)0.79788456080286535588;    /* sqrt(2/pi) */
    const REAL c = (REAL)0.044715;
    if (approx == TR_GELU_TANH) {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            out[i] = (REAL)0.5 * v * (1 + tanh(k * (v + c * v * v * v)));
        }
    } else {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            out[i] = (REAL)0.5 * v * (1 + erf(v * inv_sqrt2));
        }
    }
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_gelu_bwd)(REAL *dx, const REAL *dout, const REAL *x, int64_t n, int approx)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    const REAL inv_sqrt2pi = (REAL)0.39894228040143267794;
    const REAL k = (REAL)0.79788456080286535588;
    const REAL c = (REAL)0.044715;
    if (approx == TR_GELU_TANH) {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            REAL t = tanh(k * (v + c * v * v * v));
            REAL d = (REAL)0.5 * (1 + t) + (REAL)0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
            dx[i] = dout[i] * d;
        }
    } else {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i];
            REAL d = (REAL)0.5 * (1 + erf(v * inv_sqrt2)) + v * inv_sqrt2pi * exp(-(REAL)0.5 * v * v);
            dx[i] = dout[i] * d;
        }
    }
}
