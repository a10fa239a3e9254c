/* optim.c — the optimizer kernels (optim.h): AdamW, SGD and Adafactor, written once over REAL
 * and instantiated here for float (the runtime) and double (the tests' reference precision). */
#ifndef KFN
#include "cpu/optim.h"

#include <math.h>
#include <stddef.h>

#include "cpu/fast_math.h"

#define KERNEL_IMPL "cpu/optim.c"
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

/* The bodies of the SGD and Adafactor kernels over REAL / KFN(name). Element arithmetic
 * runs in REAL in the order the reference implementations use; sums (means, RMS) accumulate
 * in double in a fixed order, so a step is reproducible bit for bit whatever the number of
 * threads. */

/* ------------------------------------------------------------ sgd */

/* One torch.optim.SGD step (maximize off), in place on param and momentum_buf ([n];
 * NULL when momentum is 0); grad is read only. With g = grad / grad_scale:
 *   d = g + weight_decay * param                       (coupled L2)
 *   buf = d on the first step, else momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf            (when momentum != 0)
 *   param -= lr * d */
void KFN(tr_k_sgd_step)(REAL *param, REAL *momentum_buf, const REAL *grad, int64_t n, REAL lr, REAL momentum,
                   REAL dampening, REAL weight_decay, int nesterov, int first_step, REAL grad_scale)
{
    REAL inv_scale = 1 / grad_scale, keep = 1 - dampening;
    int use_momentum = momentum != 0 && momentum_buf;
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        REAL d = grad[i] * inv_scale;
        if (weight_decay != 0) d = d + weight_decay * param[i];
        if (use_momentum) {
            REAL b = first_step ? d : momentum * momentum_buf[i] + keep * d;
            momentum_buf[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        param[i] = param[i] - lr * d;
    }
}

/* ------------------------------------------------------------ adafactor */

/* One transformers Adafactor step in place. The parameter is B matrices [R, C] (factored:
 * row [B*R] and col [B*C] hold the running means of g^2 + eps1 over columns and over
 * rows; v is NULL; work holds B*(R+C) doubles) or a vector of n = B*R*C elements (v [n];
 * row, col and work NULL). exp_avg [n] is the first moment, or NULL (beta1 None).
 * Returns the learning rate used: lr, or with relative_step min(1e-2 (1e-6 t with
 * warmup_init), 1/sqrt(t)); times max(eps2, RMS(param)) with scale_parameter. Then
 *   u = g * rsqrt(row_i / mean(row)) * rsqrt(col_j)   or   g * rsqrt(v)
 *   u = lr * u / max(1, RMS(u) / clip_threshold);  exp_avg = beta1 exp_avg + (1-beta1) u
 *   param -= lr * weight_decay * param;  param -= (exp_avg or u) */
double KFN(tr_k_adafactor_step)(REAL *param, REAL *exp_avg, REAL *row, REAL *col, REAL *v, double *work,
                           const REAL *grad, int64_t B, int64_t R, int64_t C, const adafactor_hparams *hp)
{
    const int64_t n = B * R * C;
    const double t = (double)hp->step;
    const REAL inv_scale = (REAL)(1 / hp->grad_scale), eps1 = (REAL)hp->eps1;
    const REAL beta2t = (REAL)(1 - pow(t, hp->decay_rate)), keep2 = 1 - beta2t;

    double rel = hp->lr, lr;
    if (hp->relative_step) {
        double min_step = hp->warmup_init ? 1e-6 * t : 1e-2;
        rel = fmin(min_step, 1 / sqrt(t));
    }
    lr = rel;
    if (hp->scale_parameter) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)param[i] * (double)param[i];
        lr = fmax(hp->eps2, sqrt(ss / (double)n)) * rel;
    }

    /* second moments: running means of g^2 + eps1, factored or not */
    if (row) {
        for (int64_t b = 0; b < B; b++) {
            const REAL *g = grad + b * R * C;
            REAL *rw = row + b * R, *cl = col + b * C;
            double *rf = work + b * R, *cf = work + B * R + b * C;
#pragma omp parallel for if (R * C > 65536)
            for (int64_t r = 0; r < R; r++) {
                double s = 0;
                for (int64_t j = 0; j < C; j++) {
                    REAL gi = g[r * C + j] * inv_scale;
                    s += (double)(gi * gi + eps1);
                }
                rw[r] = beta2t * rw[r] + keep2 * (REAL)(s / (double)C);
            }
            enum { COLS = 256 };
#pragma omp parallel for if (R * C > 65536)
            for (int64_t j0 = 0; j0 < C; j0 += COLS) {
                int64_t j1 = j0 + COLS < C ? j0 + COLS : C;
                for (int64_t j = j0; j < j1; j++) cf[j] = 0;
                for (int64_t r = 0; r < R; r++)
                    for (int64_t j = j0; j < j1; j++) {
                        REAL gi = g[r * C + j] * inv_scale;
                        cf[j] += (double)(gi * gi + eps1);
                    }
                for (int64_t j = j0; j < j1; j++) {
                    cl[j] = beta2t * cl[j] + keep2 * (REAL)(cf[j] / (double)R);
                    cf[j] = (double)(1 / KSQRT(cl[j]));
                }
            }
            double rs = 0;
            for (int64_t r = 0; r < R; r++) rs += (double)rw[r];
            REAL rmean = (REAL)(rs / (double)R);
            for (int64_t r = 0; r < R; r++) rf[r] = (double)(1 / KSQRT(rw[r] / rmean));
        }
    } else {
#pragma omp parallel for if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            REAL gi = grad[i] * inv_scale;
            v[i] = beta2t * v[i] + keep2 * (gi * gi + eps1);
        }
    }

    /* RMS of the update, then the clipped, scaled step. The update is recomputed in
     * both passes rather than stored: no [n] scratch. Factored rows are the B*R rows of
     * C elements; a vector is one row of n elements. */
    const int64_t nrows = row ? B * R : 1, ncols = row ? C : n;
    double uu = 0;
    for (int64_t r = 0; r < nrows; r++) {
        const REAL *g = grad + r * ncols;
        const double *cf = row ? work + B * R + (r / R) * C : NULL;
        const REAL rf = row ? (REAL)work[r] : 1;
        for (int64_t j = 0; j < ncols; j++) {
            REAL gi = g[j] * inv_scale;
            double u = row ? (double)((rf * (REAL)cf[j]) * gi) : (double)((1 / KSQRT(v[j])) * gi);
            uu += u * u;
        }
    }
    double clip = sqrt(uu / (double)n) / hp->clip_threshold;
    const REAL denom = (REAL)(clip > 1 ? clip : 1), lr_r = (REAL)lr;
    const REAL beta1 = (REAL)hp->beta1, keep1 = 1 - beta1, decay = (REAL)(-hp->weight_decay * lr);
#pragma omp parallel for if (n > 65536 && nrows > 1)
    for (int64_t r = 0; r < nrows; r++) {
        const int64_t o = r * ncols;
        const double *cf = row ? work + B * R + (r / R) * C : NULL;
        const REAL rf = row ? (REAL)work[r] : 1;
        for (int64_t j = 0; j < ncols; j++) {
            REAL gi = grad[o + j] * inv_scale;
            REAL u = row ? (rf * (REAL)cf[j]) * gi : (1 / KSQRT(v[o + j])) * gi;
            u = u / denom * lr_r;
            if (exp_avg) u = exp_avg[o + j] = beta1 * exp_avg[o + j] + keep1 * u;
            REAL p = param[o + j];
            if (hp->weight_decay != 0) p = p + decay * p;
            param[o + j] = p - u;
        }
    }
    return lr;
}

#endif
