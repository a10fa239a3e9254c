/* softmax.c — instantiates softmax_impl.h for float and double. */
#include "cpu/softmax.h"

#include <tgmath.h>

#define KERNEL_IMPL "cpu/softmax_impl.h"
#include "cpu/instantiate.h"
