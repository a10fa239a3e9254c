/* elementwise.c — instantiates the elementwise kernels (elementwise_impl.h) for float
 * (the runtime) and double (the tests' finite-difference reference). */
#include "cpu/elementwise.h"

#define REAL float
#define KFN(n) n##_f32
#include "cpu/elementwise_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(n) n##_f64
#include "cpu/elementwise_impl.h"
#undef REAL
#undef KFN
