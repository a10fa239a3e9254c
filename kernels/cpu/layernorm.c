/* layernorm.c — instantiates layernorm_impl.h for float and double. Math functions come
 * from <tgmath.h>, so sqrt is sqrtf in the float instance. */
#include "cpu/layernorm.h"

#include <tgmath.h>

#define REAL float
#define KFN(n) n##_f32
#include "cpu/layernorm_impl.h"
#undef REAL
#undef KFN

#define REAL double
#define KFN(n) n##_f64
#include "cpu/layernorm_impl.h"
#undef REAL
#undef KFN
