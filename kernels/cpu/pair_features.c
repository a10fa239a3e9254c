/* pair_features.c — instantiates the feature-matrix kernels (pair_features_impl.h) for float (the
 * runtime) and double (the tests' reference). */
#include "cpu/pair_features.h"

#define KERNEL_IMPL "cpu/pair_features_impl.h"
#include "cpu/instantiate.h"
