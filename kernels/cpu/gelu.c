/* gelu.c — instantiates gelu_impl.h for float and double (<tgmath.h> picks tanhf for
 * float). The float kernels take erf and exp from fast_math.h (vectorised; libm's erff was
 * 3 % of an fp32 training step as a scalar call per element), the double reference libm's. */
#include "cpu/gelu.h"

#include <tgmath.h>

#include "cpu/fast_math.h"

enum { GELU_SPAN = 4096 };   /* elements per vectorised call; the unit threads share */

TR_FAST_INLINE float gelu_one_plus_erf_f32(float x) { return tr_fast_one_plus_erff(x); }
TR_FAST_INLINE float gelu_exp_f32(float x) { return tr_fast_expf(x); }
static inline double gelu_one_plus_erf_f64(double x) { return 1 + erf(x); }
static inline double gelu_exp_f64(double x) { return exp(x); }

#define KERNEL_IMPL "cpu/gelu_impl.h"
#include "cpu/instantiate.h"
