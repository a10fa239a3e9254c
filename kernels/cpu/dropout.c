/* dropout.c — instantiates the dropout kernels (dropout_impl.h) for float (the runtime) and
 * double (the tests' finite-difference reference). */
#include "cpu/dropout.h"

#include <math.h>

#define KERNEL_IMPL "cpu/dropout_impl.h"
#include "cpu/instantiate.h"
