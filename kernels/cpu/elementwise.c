/* elementwise.c — instantiates the elementwise kernels (elementwise_impl.h) for float
 * (the runtime) and double (the tests' finite-difference reference). */
#include "cpu/elementwise.h"

#define KERNEL_IMPL "cpu/elementwise_impl.h"
#include "cpu/instantiate.h"
