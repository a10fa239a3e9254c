/* layernorm.c — instantiates layernorm_impl.h for float and double. Math functions come
 * from <tgmath.h>, so sqrt is sqrtf in the float instance. */
#include "cpu/layernorm.h"

#include <tgmath.h>

#include "cpu/fast_math.h"

#define KERNEL_IMPL "cpu/layernorm_impl.h"
#include "cpu/instantiate.h"
