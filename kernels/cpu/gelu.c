/* gelu.c — instantiates gelu_impl.h for float and double (<tgmath.h> picks erff, tanhf,
 * expf for float). */
#include "cpu/gelu.h"

#include <tgmath.h>

#define KERNEL_IMPL "cpu/gelu_impl.h"
#include "cpu/instantiate.h"
