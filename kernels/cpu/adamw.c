/* adamw.c — the optimizer kernels (adamw.h), written once over REAL and instantiated here for
 * float (the runtime) and double (the tests' finite-difference reference). */
#ifndef KFN
#include "cpu/adamw.h"

#include <math.h>

#include "cpu/fast_math.h"

#define KERNEL_IMPL "cpu/adamw.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body of the fused AdamW kernel over REAL / KFN(name).
 * Semantics are torch.optim.AdamW's (amsgrad off, maximize off). */

/* ------------------------------------------------------------ adamw */

/* One step, in place on param, m and v (all [n]); grad is read only. With g = grad /
 * grad_scale (grad_scale is the loss scale the gradients still carry; 1 when none):
 *   param -= lr * weight_decay * param                   (decoupled weight decay)
 *   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
 *   param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
 * step counts from 1. */
/* One span of the step under `omp simd` in the AVX-512 / AVX2 clones (fast_math.h); the
 * kernels are built with -fno-math-errno (Makefile), without which sqrt is a call with an
 * errno branch and the loop stays scalar. Elementwise: the same bits on every path. */
TR_SIMD_CLONES static void KFN(adamw_span)(REAL *param, REAL *m, REAL *v, const REAL *grad, int64_t n, REAL beta1,
                                           REAL beta2, REAL eps, REAL bc2_sqrt, REAL step_size, REAL decay,
                                           REAL inv_scale)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        REAL g = grad[i] * inv_scale;
        REAL p = param[i] * decay;
        REAL mi = beta1 * m[i] + (1 - beta1) * g;
        REAL vi = beta2 * v[i] + (1 - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = p - step_size * mi / (KSQRT(vi) / bc2_sqrt + eps);
    }
}

void KFN(tr_k_adamw_step)(REAL *param, REAL *m, REAL *v, const REAL *grad, int64_t n, REAL lr, REAL beta1,
                     REAL beta2, REAL eps, REAL weight_decay, int64_t step, REAL grad_scale)
{
    REAL bc1 = (REAL)(1 - pow((double)beta1, (double)step));
    REAL bc2_sqrt = (REAL)sqrt(1 - pow((double)beta2, (double)step));
    REAL step_size = lr / bc1, decay = 1 - lr * weight_decay, inv_scale = 1 / grad_scale;
    const int64_t span = 16384;
    /* Small calls (the op's 4096-element chunks, from its own parallel loop) run here: even
     * an if(0) region is a libgomp team made and freed per call. */
    if (n <= 65536) {
        KFN(adamw_span)(param, m, v, grad, n, beta1, beta2, eps, bc2_sqrt, step_size, decay, inv_scale);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < n; s += span)
        KFN(adamw_span)(param + s, m + s, v + s, grad + s, n - s < span ? n - s : span, beta1, beta2, eps, bc2_sqrt,
                        step_size, decay, inv_scale);
}

#endif
