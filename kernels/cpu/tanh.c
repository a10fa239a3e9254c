/* tanh.c — instantiates tanh_impl.h for float and double (<tgmath.h> picks tanhf for
 * float). */
#include "cpu/tanh.h"

#include <tgmath.h>

#define REAL float
#define KFN(n) n##_f32
#include "cpu/tanh_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(n) n##_f64
#include "cpu/tanh_impl.h"
#undef REAL
#undef KFN
