/* gelu.c — instantiates gelu_impl.h for float and double (<tgmath.h> picks tanhf for
 * float). The float kernels take erf and exp from fast_math.h (vectorised; libm's erff was
 * 3 % of an fp32 training step as a scalar call per element), the double reference libm's. */
#include "cpu/gelu.h"

#include <tgmath.h>

#include "cpu/fast_math.h"

enum { GELU_SPAN = 4096 };   /* elements per vectorised call; the unit threads share */

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

#define KERNEL_IMPL "cpu/gelu_impl.h"
#include "cpu/instantiate.h"
