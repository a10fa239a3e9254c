/* tanh.c — the tanh kernels (tanh.h), written once over REAL and instantiated here for float
 * and double (<tgmath.h> picks tanhf for float). */
#ifndef KFN
#include "cpu/tanh.h"

#include <tgmath.h>

#define KERNEL_IMPL "cpu/tanh.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL, instantiated for float and double. */

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

#endif
