/* softmax.c — instantiates softmax_impl.h for float and double. */
#include "cpu/softmax.h"

#include <tgmath.h>

#define REAL float
#define KFN(n) n##_f32
#include "cpu/softmax_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(n) n##_f64
#include "cpu/softmax_impl.h"
#undef REAL
#undef KFN
