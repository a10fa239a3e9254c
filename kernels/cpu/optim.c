/* optim.c — instantiates the optimizer kernels (optim_impl.h) for float (the runtime) and
 * double (the tests' finite-difference reference). */
#include "cpu/optim.h"

#include <math.h>

#define KERNEL_IMPL "cpu/optim_impl.h"
#include "cpu/instantiate.h"
