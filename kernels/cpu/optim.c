/* optim.c — instantiates the optimizer kernels (optim_impl.h) for float (the runtime) and
 * double (the tests' finite-difference reference). */
#include "cpu/optim.h"

#include <math.h>

#define REAL float
#define KFN(n) n##_f32
#define KEXP expf
#define KLOG logf
#define KSQRT sqrtf
#include "cpu/optim_impl.h"
#undef REAL
#undef KFN
#undef KEXP
#undef KLOG
#undef KSQRT

#define REAL double
#define KFN(n) n##_f64
#define KEXP exp
#define KLOG log
#define KSQRT sqrt
#include "cpu/optim_impl.h"
#undef REAL
#undef KFN
#undef KEXP
#undef KLOG
#undef KSQRT
