/* gelu.c — instantiates gelu_impl.h for float and double (<tgmath.h> picks erff, tanhf,
 * expf for float). */
#include "cpu/gelu.h"

#include <tgmath.h>

#define REAL float
#define KFN(n) n##_f32
#include "cpu/gelu_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(n) n##_f64
#include "cpu/gelu_impl.h"
#undef REAL
#undef KFN
