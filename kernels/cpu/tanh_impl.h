/* tanh_impl.h — the body of tanh.c over REAL, instantiated for float and double. */

/* ------------------------------------------------------------ forward */

void KFN(tr_k_tanh_fwd)(REAL *out, const REAL *x, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) out[i] = tanh(x[i]);
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_tanh_bwd)(REAL *dx, const REAL *dout, const REAL *y, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) dx[i] = dout[i] * (1 - y[i] * y[i]);
}
