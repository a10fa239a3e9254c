/* pair_features.c — instantiates the feature-matrix kernels (features_impl.h) for float (the
 * runtime) and double (the tests' reference). */
#include "cpu/pair_features.h"

#define REAL float
#define KFN(n) n##_f32
#include "cpu/pair_features_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(n) n##_f64
#include "cpu/pair_features_impl.h"
#undef REAL
#undef KFN
