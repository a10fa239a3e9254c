/* optim2.c — instantiates the SGD and Adafactor kernels (optim2_impl.h) for float (the
 * runtime) and double (the tests' reference precision). */
#include "cpu/optim2.h"

#include <math.h>
#include <stddef.h>

#define REAL float
#define KFN(n) n##_f32
#define KSQRT sqrtf
#include "cpu/optim2_impl.h"
#undef REAL
#undef KFN
#undef KSQRT

#define REAL double
#define KFN(n) n##_f64
#define KSQRT sqrt
#include "cpu/optim2_impl.h"
#undef REAL
#undef KFN
#undef KSQRT
