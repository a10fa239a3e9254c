/* layernorm_impl.h — the body of layernorm.c over REAL, instantiated for float and double. */

/* ------------------------------------------------------------ forward */

void KFN(tr_k_layernorm_fwd)(REAL *out, REAL *mean, REAL *rstd, const REAL *x,
                               const REAL *weight, const REAL *bias, int64_t N, int64_t C,
                               REAL eps)
{
#pragma omp parallel for if (N * C > 16384)
    for (int64_t n = 0; n < N; n++) {
        const REAL *xr = x + n * C;
        REAL *o = out + n * C;
        /* two passes (mean, then centred squares): no cancellation for large means */
        REAL m = 0;
        for (int64_t c = 0; c < C; c++) m += xr[c];
        m /= (REAL)C;
        REAL v = 0;
        for (int64_t c = 0; c < C; c++) {
            REAL d = xr[c] - m;
            v += d * d;
        }
        v /= (REAL)C;
        REAL s = 1 / sqrt(v + eps);
        for (int64_t c = 0; c < C; c++)
            o[c] = (xr[c] - m) * s * weight[c] + (bias ? bias[c] : 0);
        mean[n] = m;
        rstd[n] = s;
    }
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_layernorm_bwd)(REAL *dx, REAL *dweight, REAL *dbias, const REAL *dout,
                                const REAL *x, const REAL *weight, const REAL *mean,
                                const REAL *rstd, int64_t N, int64_t C)
{
    if (dx) {
        /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight */
#pragma omp parallel for if (N * C > 16384)
        for (int64_t n = 0; n < N; n++) {
            const REAL *xr = x + n * C, *dr = dout + n * C;
            REAL m = mean[n], s = rstd[n];
            REAL gsum = 0, gxsum = 0;
            for (int64_t c = 0; c < C; c++) {
                REAL g = dr[c] * weight[c];
                gsum += g;
                gxsum += g * (xr[c] - m) * s;
            }
            gsum /= (REAL)C;
            gxsum /= (REAL)C;
            REAL *o = dx + n * C;
            for (int64_t c = 0; c < C; c++) {
                REAL xhat = (xr[c] - m) * s;
                o[c] = s * (dr[c] * weight[c] - gsum - xhat * gxsum);
            }
        }
    }
    if (dweight || dbias) {
        /* column chunks per thread, rows summed in order: deterministic, no races */
        const int64_t chunk = 64;
        int64_t nchunks = (C + chunk - 1) / chunk;
#pragma omp parallel for if (N * C > 16384)
        for (int64_t k = 0; k < nchunks; k++) {
            int64_t c0 = k * chunk, c1 = c0 + chunk < C ? c0 + chunk : C;
            REAL aw[64], ab[64];
            for (int64_t c = c0; c < c1; c++) aw[c - c0] = ab[c - c0] = 0;
            for (int64_t n = 0; n < N; n++) {
                const REAL *xr = x + n * C, *dr = dout + n * C;
                REAL m = mean[n], s = rstd[n];
                for (int64_t c = c0; c < c1; c++) {
                    aw[c - c0] += dr[c] * (xr[c] - m) * s;
                    ab[c - c0] += dr[c];
                }
            }
            for (int64_t c = c0; c < c1; c++) {
                if (dweight) dweight[c] += aw[c - c0];
                if (dbias) dbias[c] += ab[c - c0];
            }
        }
    }
}
