/* sgd_adafactor.c — instantiates the SGD and Adafactor kernels (optim2_impl.h) for float (the
 * runtime) and double (the tests' reference precision). */
#include "cpu/sgd_adafactor.h"

#include <math.h>
#include <stddef.h>

#define KERNEL_IMPL "cpu/sgd_adafactor_impl.h"
#include "cpu/instantiate.h"
