/* similarity.c — instantiates the L2-normalisation and cosine-similarity kernels
 * (similarity_impl.h) for float (the runtime) and double (the tests' finite-difference
 * reference). */
#include "cpu/similarity.h"

#include <cblas.h>
#include <math.h>

#define REAL float
#define KFN(n) n##_f32
#define KEXP expf
#define KLOG logf
#define KSQRT sqrtf
#define KGEMM cblas_sgemm
#include "cpu/similarity_impl.h"
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
#include "cpu/similarity_impl.h"
#undef REAL
#undef KFN
#undef KEXP
#undef KLOG
#undef KSQRT
#undef KGEMM
