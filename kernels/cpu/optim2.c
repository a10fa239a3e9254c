/* optim2.c — instantiates the SGD and Adafactor kernels (optim2_impl.h) for float (the
 * runtime) and double (the tests' reference precision). */
#include "cpu/optim2.h"

#include <math.h>
#include <stddef.h>

#define KERNEL_IMPL "cpu/optim2_impl.h"
#include "cpu/instantiate.h"
