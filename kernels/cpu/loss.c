/* loss.c — instantiates the cross-entropy loss kernels (loss_impl.h) for float (the
 * runtime) and double (the tests' finite-difference reference). */
#include "cpu/loss.h"

#include <math.h>

#define KERNEL_IMPL "cpu/loss_impl.h"
#include "cpu/instantiate.h"
