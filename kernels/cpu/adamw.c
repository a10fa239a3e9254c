/* adamw.c — instantiates the optimizer kernels (optim_impl.h) for float (the runtime) and
 * double (the tests' finite-difference reference). */
#include "cpu/adamw.h"

#include <math.h>

#include "cpu/fast_math.h"

#define KERNEL_IMPL "cpu/adamw_impl.h"
#include "cpu/instantiate.h"
