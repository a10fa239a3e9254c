/* loss.c — the cross-entropy loss kernels (loss.h), written once over REAL and instantiated
 * here for float (the runtime) and double (the tests' finite-difference reference). */
#ifndef KFN
#include "cpu/loss.h"

#include <math.h>

#define KERNEL_IMPL "cpu/loss.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the cross-entropy kernels over REAL / KFN(name).
 * logits [N, K]; targets [N] int64, each in [0, K) or equal to ignore_index (the caller
 * validates). With label smoothing ls the per-row loss is torch's:
 *   loss_n = (1 - ls) * (lse_n - z[n, t_n]) + ls * (lse_n - mean_k z[n, k]).
 * The mean is over the rows that are not ignored. */

/* ------------------------------------------------------------ forward */

/* losses[n] = the row's loss (=), lse[n] = log-sum-exp of the row (=), both 0 for ignored
 * rows. Returns the number of rows not ignored (the divisor of the mean). */
int64_t KFN(tr_k_cross_entropy_fwd)(REAL *losses, REAL *lse, const REAL *logits, const int64_t *targets,
                                   int64_t N, int64_t K, int64_t ignore_index, REAL label_smoothing)
{
    int64_t count = 0;
#pragma omp parallel for reduction(+ : count) if (N * K > 65536)
    for (int64_t n = 0; n < N; n++) {
        if (targets[n] == ignore_index) {
            losses[n] = 0;
            lse[n] = 0;
            continue;
        }
        const REAL *z = logits + n * K;
        REAL mx = z[0];
        for (int64_t k = 1; k < K; k++) mx = z[k] > mx ? z[k] : mx;
        REAL se = 0, sz = 0;
        for (int64_t k = 0; k < K; k++) {
            se += KEXP(z[k] - mx);
            sz += z[k];
        }
        /* se >= 1 (the row's maximum contributes exp(0)); the guard only tells the analyser */
        REAL l = mx + KLOG(se > 0 ? se : 1);
        lse[n] = l;
        losses[n] = (1 - label_smoothing) * (l - z[targets[n]]) + label_smoothing * (l - sz / (REAL)K);
        count++;
    }
    return count;
}

/* ------------------------------------------------------------ backward */

/* dlogits[n, k] = g * (softmax(z_n)[k] - (1 - ls) * [k == t_n] - ls / K) (=) where g is the
 * upstream gradient of the mean loss divided by the count of rows not ignored; ignored
 * rows get 0. lse comes from the forward. dlogits may alias logits (in-place backward). */
void KFN(tr_k_cross_entropy_bwd)(REAL *dlogits, const REAL *logits, const REAL *lse, const int64_t *targets,
                                 REAL g, int64_t N, int64_t K, int64_t ignore_index, REAL label_smoothing)
{
#pragma omp parallel for if (N * K > 65536)
    for (int64_t n = 0; n < N; n++) {
        REAL *dz = dlogits + n * K;
        if (targets[n] == ignore_index) {
            for (int64_t k = 0; k < K; k++) dz[k] = 0;
            continue;
        }
        const REAL *z = logits + n * K;
        REAL smooth = label_smoothing / (REAL)K;
        for (int64_t k = 0; k < K; k++) dz[k] = g * (KEXP(z[k] - lse[n]) - smooth);
        dz[targets[n]] -= g * (1 - label_smoothing);
    }
}

#endif
