/* tanh.c — instantiates tanh_impl.h for float and double (<tgmath.h> picks tanhf for
 * float). */
#include "cpu/tanh.h"

#include <tgmath.h>

#define KERNEL_IMPL "cpu/tanh_impl.h"
#include "cpu/instantiate.h"
