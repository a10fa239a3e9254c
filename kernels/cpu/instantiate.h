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
 * type's math functions KEXP, KLOG, KSQRT and GEMM KGEMM (include <cblas.h> to use it).
 * Each is KPICK(float's, double's): KPICK picks the first in the float instance and the
 * second in the double one. A family names its own type-dependent choices the same way,
 * defined before it includes this header; one that defines KEXP itself (attention.c: a fast
 * exp for float) keeps its own. */
#ifndef KERNEL_IMPL
#error "define KERNEL_IMPL as the family's own NAME.c before including cpu/instantiate.h"
#endif

#define REAL KPICK(float, double)
#define KFN(n) KPICK(n##_f32, n##_f64)
#ifndef KEXP
#define KEXP KPICK(expf, exp)
#endif
#define KLOG KPICK(logf, log)
#define KSQRT KPICK(sqrtf, sqrt)
#define KGEMM KPICK(cblas_sgemm, cblas_dgemm)

#define KPICK(f32, f64) f32
#include KERNEL_IMPL
#undef KPICK

#define KPICK(f32, f64) f64
#include KERNEL_IMPL
#undef KPICK

#undef REAL
#undef KFN
#undef KEXP
#undef KLOG
#undef KSQRT
#undef KGEMM
#undef KERNEL_IMPL
