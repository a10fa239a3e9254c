/* activation.c — the elementwise activations' kernels (activation.h): GELU (and ReLU, its third
 * form) and tanh, written once over REAL and instantiated here for float and double
 * (<tgmath.h> picks tanhf for float). The float GELU kernels take erf and exp from
 * fast_math.h (vectorised; libm's erff was 3 % of an fp32 training step as a scalar call per
 * element), the double reference libm's. */
#ifndef KFN
#include "cpu/activation.h"

#include <tgmath.h>

#include "cpu/fast_math.h"

enum { GELU_SPAN = 4096 };   /* elements per vectorised call; the unit threads share */

/* the tanh form's constants: sqrt(2/pi) and the cubic term's coefficient */
#define GELU_TANH_K 0.79788456080286535588
#define GELU_TANH_C 0.044715

TR_FAST_INLINE float gelu_one_plus_erf_f32(float x) { return tr_fast_one_plus_erff(x); }
/* d GELU / dv = Phi(v) + v phi(v): 1 + erf(a) and the density share one exp, e^{-a^2} =
 * e^{-v^2/2} with a = v / sqrt 2 */
TR_FAST_INLINE float gelu_deriv_f32(float v)
{
    const float inv_sqrt2 = 0.70710678118654752440f, inv_sqrt2pi = 0.39894228040143267794f;
    float a = v * inv_sqrt2, e = tr_fast_expf(-a * a);
    return 0.5f * tr_fast_one_plus_erff_e(a, e) + v * inv_sqrt2pi * e;
}
static inline double gelu_one_plus_erf_f64(double x) { return 1 + erf(x); }
static inline double gelu_deriv_f64(double v)
{
    return 0.5 * (1 + erf(v * 0.70710678118654752440)) + v * 0.39894228040143267794 * exp(-0.5 * v * v);
}

#define KERNEL_IMPL "cpu/activation.c"
#include "cpu/instantiate.h"

#else /* KFN defined: this file included again, once per REAL (the instantiation above) */

/* The body over REAL, instantiated for float and double. The
 * element loops are spans of GELU_SPAN elements, each span one vectorised call (compiled
 * for AVX-512, AVX2 and the baseline, see fast_math.h), the spans shared among threads.
 * KFN(gelu_one_plus_erf) and KFN(gelu_deriv) are this file's per-type 1 + erf and GELU derivative
 * (vectorisable for float, libm for the double reference). */

/* GELU's tanh form: t = tanh(sqrt(2/pi) (v + 0.044715 v^3)), the GELU is 0.5 v (1 + t), and
 * its derivative comes from v and t. */
static inline REAL KFN(gelu_tanh_t)(REAL v)
{
    const REAL k = (REAL)GELU_TANH_K, c = (REAL)GELU_TANH_C;
    return tanh(k * (v + c * v * v * v));
}

static inline REAL KFN(gelu_tanh_deriv)(REAL v, REAL t)
{
    const REAL k = (REAL)GELU_TANH_K, c = (REAL)GELU_TANH_C;
    return (REAL)0.5 * (1 + t) + (REAL)0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
}

/* ------------------------------------------------------------ spans */

TR_SIMD_CLONES static void KFN(gelu_fwd_span)(REAL *out, const REAL *x, int64_t n, int approx)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    if (approx == TR_GELU_RELU) {
        for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0 ? x[i] : 0;
    } else if (approx == TR_GELU_TANH) {
        for (int64_t i = 0; i < n; i++) out[i] = (REAL)0.5 * x[i] * (1 + KFN(gelu_tanh_t)(x[i]));
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
    if (approx == TR_GELU_RELU) {
        for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0 ? dout[i] : 0;
    } else if (approx == TR_GELU_TANH) {
        for (int64_t i = 0; i < n; i++) {
            REAL d = KFN(gelu_tanh_deriv)(x[i], KFN(gelu_tanh_t)(x[i]));
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

/* GeGLU's spans: the erf form in one vectorised pass, the others through the spans above. */
TR_SIMD_CLONES static void KFN(gelu_gate_fwd_span)(REAL *out, const REAL *x, const REAL *g, int64_t n, int approx)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    if (approx != TR_GELU_ERF) {
        KFN(gelu_fwd_span)(out, x, n, approx);
        for (int64_t i = 0; i < n; i++) out[i] *= g[i];
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        REAL v = x[i];
        out[i] = (REAL)0.5 * v * KFN(gelu_one_plus_erf)(v * inv_sqrt2) * g[i];
    }
}

TR_SIMD_CLONES static void KFN(gelu_gate_bwd_span)(REAL *dx, REAL *dg, const REAL *dout, const REAL *x,
                                                   const REAL *g, int64_t n, int approx)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    if (approx != TR_GELU_ERF) {   /* element by element, each read before its writes */
        for (int64_t i = 0; i < n; i++) {
            REAL v = x[i], gi = g[i], d = dout[i], f, fd;
            if (approx == TR_GELU_TANH) {
                REAL t = KFN(gelu_tanh_t)(v);
                f = (REAL)0.5 * v * (1 + t);
                fd = KFN(gelu_tanh_deriv)(v, t);
            } else {
                f = v > 0 ? v : 0;
                fd = v > 0 ? 1 : 0;
            }
            dx[i] = d * gi * fd;
            dg[i] = d * f;
        }
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        REAL v = x[i], d = dout[i];
        dx[i] = d * g[i] * KFN(gelu_deriv)(v);
        dg[i] = d * (REAL)0.5 * v * KFN(gelu_one_plus_erf)(v * inv_sqrt2);
    }
}

void KFN(tr_k_gelu_gate_fwd)(REAL *out, const REAL *x, const REAL *g, int64_t n, int approx)
{
    KFN(gelu_gate_fwd_span)(out, x, g, n, approx);
}

void KFN(tr_k_gelu_gate_bwd)(REAL *dx, REAL *dg, const REAL *dout, const REAL *x, const REAL *g, int64_t n,
                             int approx)
{
    KFN(gelu_gate_bwd_span)(dx, dg, dout, x, g, n, approx);
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

/* ------------------------------------------------------------ tanh */

void KFN(tr_k_tanh_fwd)(REAL *out, const REAL *x, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) out[i] = tanh(x[i]);
}

void KFN(tr_k_tanh_bwd)(REAL *dx, const REAL *dout, const REAL *y, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) dx[i] = dout[i] * (1 - y[i] * y[i]);
}

#endif
