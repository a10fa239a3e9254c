/* score_loss.c — the scored-pair loss kernels (score_loss.h), written once over REAL and
 * instantiated here for float (the runtime) and double (the CPU slot and the tests' reference). */
#ifndef KFN
#include "cpu/score_loss.h"

#include <math.h>

#define KERNEL_IMPL "cpu/score_loss.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the scored-pair loss kernels, written once over the scalar
 * type: the instantiation defines REAL, KFN(name), KEXP and KLOG and includes this file once
 * per type. The order of the sums is lua/trainer/losses'
 * host code's (cosent.lua, cosine.lua): pairs (i, j) row by row. */

/* CoSENT: s_i = scale cos_i; loss = log(1 + sum over pairs with y_i > y_j of exp(s_j - s_i)),
 * as a log-sum-exp shifted by m = max(0, every s_j - s_i); dcos_k = scale * d loss / d s_k,
 * each pair's weight w = exp(s_j - s_i - loss) added to j and taken from i. Ties add nothing. */
void KFN(tr_k_cosent_loss)(REAL *loss, REAL *dcos, const REAL *cos, const REAL *y, REAL scale, int64_t B)
{
    REAL m = 0;
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < B; j++)
            if (y[i] > y[j]) {
                const REAL t = scale * cos[j] - scale * cos[i];
                if (t > m) m = t;
            }
    REAL z = KEXP(-m);
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < B; j++)
            if (y[i] > y[j]) z += KEXP(scale * cos[j] - scale * cos[i] - m);
    const REAL l = m + KLOG(z);
    for (int64_t k = 0; k < B; k++) dcos[k] = 0;
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < B; j++)
            if (y[i] > y[j]) {
                const REAL w = KEXP(scale * cos[j] - scale * cos[i] - l);
                dcos[j] += w;
                dcos[i] -= w;
            }
    for (int64_t k = 0; k < B; k++) dcos[k] *= scale;
    *loss = l;
}

/* Cosine similarity loss: loss = mean of (cos_i - y_i / score_scale)^2; dcos_i = 2 r_i / B. */
void KFN(tr_k_cosine_mse_loss)(REAL *loss, REAL *dcos, const REAL *cos, const REAL *y, REAL score_scale, int64_t B)
{
    REAL acc = 0;
    for (int64_t i = 0; i < B; i++) {
        const REAL r = cos[i] - y[i] / score_scale;
        acc += r * r;
        dcos[i] = 2 * r / (REAL)B;
    }
    *loss = B > 0 ? acc / (REAL)B : 0;
}

#endif
