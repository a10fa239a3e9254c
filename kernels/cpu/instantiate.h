/* instantiate.h — compiles a kernel family's body twice: for float (names ending in _f32,
 * the runtime's kernels) and for double (_f64, the tests' finite-difference and precision
 * reference). A family is one file, kernels/cpu/NAME.c beside its NAME.h: its includes and
 * helpers under `#ifndef KFN`, which end by naming the file itself as KERNEL_IMPL and including
 * this header; its body after the `#else`, compiled once per type when this header includes
 * the file again with KFN defined:
 *
 *   #ifndef KFN
 *   #include "cpu/dropout.h"
 *   #include <math.h>
 *   #define KERNEL_IMPL "cpu/dropout.c"
 *   #include "cpu/instantiate.h"
 *   #else
 *   ... the body, over REAL and KFN(name) ...
 *   #endif
 *
 * The body sees REAL (the scalar type), KFN(name) (the suffixed function name), and the
 * type's math functions KEXP, KLOG, KSQRT and GEMM KGEMM (include <cblas.h> to use it). */
#ifndef KERNEL_IMPL
#error "define KERNEL_IMPL as the family's own NAME.c before including cpu/instantiate.h"
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
