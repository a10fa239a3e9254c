/* reduce.c — instantiates the reduction kernels (reduce_impl.h) for float (the runtime) and
 * double (the tests' finite-difference reference). */
#include "cpu/reduce.h"

#include <math.h>

#define KERNEL_IMPL "cpu/reduce_impl.h"
#include "cpu/instantiate.h"
