/* dropout.c — instantiates the dropout kernels (dropout_impl.h) for float (the runtime) and
 * double (the tests' finite-difference reference). */
#include "cpu/dropout.h"
#include "cpu/fast_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The unsigned integer as wide as each REAL, for dropout_impl.h's bit select. */
typedef uint32_t dropout_bits_f32;
typedef uint64_t dropout_bits_f64;

#define KERNEL_IMPL "cpu/dropout_impl.h"
#include "cpu/instantiate.h"
