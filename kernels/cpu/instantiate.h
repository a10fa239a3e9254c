/* instantiate.h — compiles a kernel family's body twice: for float (names ending in _f32,
 * the runtime's kernels) and for double (_f64, the tests' finite-difference and precision
 * reference). A family's .c file defines KERNEL_IMPL as its *_impl.h and includes this file:
 *
 *   #include "cpu/dropout.h"
 *   #include <math.h>
 *   #define KERNEL_IMPL "cpu/dropout_impl.h"
 *   #include "cpu/instantiate.h"
 *
 * The body sees REAL (the scalar type), KFN(name) (the suffixed function name), and the
 * type's math functions KEXP, KLOG, KSQRT and GEMM KGEMM (include <cblas.h> to use it). */
#ifndef KERNEL_IMPL
#error "define KERNEL_IMPL as the family's *_impl.h before including cpu/instantiate.h"
#endif

#define REAL float
#define KFN(n) n##_f32
#define KEXP expf
#define KLOG logf
#define KSQRT sqrtf
#define KGEMM cblas_sgemm
#include KERNEL_IMPL
#undef REAL
#undef KFN
#undef KEXP
#undef KLOG
#undef KSQRT
#undef KGEMM

#define REAL double
#define KFN(n) n##_f64
#define KEXP exp
#define KLOG log
#define KSQRT sqrt
#define KGEMM cblas_dgemm
#include KERNEL_IMPL
#undef REAL
#undef KFN
#undef KEXP
#undef KLOG
#undef KSQRT
#undef KGEMM

#undef KERNEL_IMPL
