/* score_loss.c — instantiates the scored-pair loss kernels (score_loss_impl.h) for float (the
 * runtime) and double (the CPU slot and the tests' reference). */
#include "cpu/score_loss.h"

#include <math.h>

#define KERNEL_IMPL "cpu/score_loss_impl.h"
#include "cpu/instantiate.h"
