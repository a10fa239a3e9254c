/* pooling.c — instantiates the masked pooling kernels (pooling_impl.h) for float (the
 * runtime) and double (the tests' finite-difference reference). */
#include "cpu/pooling.h"

#include <math.h>
#include <stddef.h>

#define KERNEL_IMPL "cpu/pooling_impl.h"
#include "cpu/instantiate.h"
