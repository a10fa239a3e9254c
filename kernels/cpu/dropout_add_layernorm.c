/* dropout_add_layernorm.c — instantiates dropout_add_layernorm_impl.h for float (the
 * runtime) and double (the tests' reference). <tgmath.h> makes sqrt sqrtf in the float
 * instance. */
#include "cpu/dropout_add_layernorm.h"
#include "cpu/layernorm.h"
#include "cpu/fast_math.h"

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

/* The unsigned integer as wide as each REAL, for the dropout bit select. */
typedef uint32_t dal_bits_f32;
typedef uint64_t dal_bits_f64;

#define KERNEL_IMPL "cpu/dropout_add_layernorm_impl.h"
#include "cpu/instantiate.h"
