/* cuda_check.h — the check macros for CUDA runtime and cuBLASLt calls, shared by the host
 * C of core/cuda_device/cuda_device.c (gcc) and the .cu files (nvcc). Private to the CUDA backend:
 * never included by core/trainer.h, so it may use macros and CUDA types freely.
 *
 * Contract: every CUDA or cuBLASLt call's result goes through one of these. A failure
 * becomes a status (TR_EOOM for cudaErrorMemoryAllocation / CUBLAS_STATUS_ALLOC_FAILED,
 * TR_EINTERNAL otherwise) and a message in the tr_error that names the statement, file
 * and line. The CUDA "last error" is cleared after a failure, so that the next launch
 * check does not report it a second time (a sticky error, such as an illegal address,
 * cannot be cleared: every later call reports it too, which is the truth). */
#ifndef TR_CUDA_CHECK_H
#define TR_CUDA_CHECK_H

/* tr_base.h has no C++ guards of its own; its functions have C linkage. */
#ifdef __cplusplus
extern "C" {
#endif
#include "tr_base.h"
#ifdef __cplusplus
}
#endif

#include <cublasLt.h>
#include <cuda_runtime.h>

/* ------------------------------------------------------------ status conversion */

static inline int tr_cuda_status(cudaError_t e, tr_error *err, const char *stmt, const char *file,
                                 int line)
{
    if (e == cudaSuccess) return TR_OK;
    (void)cudaGetLastError();
    return tr_fail(err, e == cudaErrorMemoryAllocation ? TR_EOOM : TR_EINTERNAL,
                   "CUDA call failed at %s:%d: `%s` returned %s (%s). An illegal address or a "
                   "launch failure usually means a kernel was given a wrong pointer or size; "
                   "rerun under compute-sanitizer to find it.",
                   file, line, stmt, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* The status's name without calling into cuBLASLt (the library is loaded lazily, and a
 * failure to load it must still be describable). */
static inline const char *tr_cublas_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (the handle was not created)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED (out of memory)";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE (an unsupported value or size)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH (the GPU lacks a needed feature)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED (a kernel failed to run)";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED (no kernel for this combination)";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "an unknown cuBLAS status";
    }
}

static inline int tr_cublas_status(cublasStatus_t s, tr_error *err, const char *stmt,
                                   const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return TR_OK;
    (void)cudaGetLastError();
    return tr_fail(err, s == CUBLAS_STATUS_ALLOC_FAILED ? TR_EOOM : TR_EINTERNAL,
                   "cuBLASLt call failed at %s:%d: `%s` returned %s (status %d). NOT_SUPPORTED or "
                   "INVALID_VALUE mean this combination of dtypes, transposes, alignment or "
                   "epilogue has no cuBLASLt kernel on this GPU.",
                   file, line, stmt, tr_cublas_status_name(s), (int)s);
}

/* ------------------------------------------------------------ macros */

/* Expressions: evaluate the call, give its status (TR_OK on success). For cleanup paths:
 *   if ((rc = TR_CUDA_CALL(err, cudaStreamCreate(&s))) != TR_OK) goto fail; */
#define TR_CUDA_CALL(err, call) tr_cuda_status((call), (err), #call, __FILE__, __LINE__)
#define TR_CUBLAS_CALL(err, call) tr_cublas_status((call), (err), #call, __FILE__, __LINE__)

/* Statements: return the status from the enclosing function on failure. */
#define TR_CUDA_CHECK(err, call)                                                             \
    do {                                                                                     \
        int tr_cuda_rc_ = TR_CUDA_CALL(err, call);                                           \
        if (tr_cuda_rc_ != TR_OK) return tr_cuda_rc_;                                        \
    } while (0)
#define TR_CUBLAS_CHECK(err, call)                                                           \
    do {                                                                                     \
        int tr_cublas_rc_ = TR_CUBLAS_CALL(err, call);                                       \
        if (tr_cublas_rc_ != TR_OK) return tr_cublas_rc_;                                    \
    } while (0)

/* After a kernel launch: a bad configuration shows up only in cudaGetLastError. */
#define TR_CUDA_CHECK_LAUNCH(err) TR_CUDA_CHECK(err, cudaGetLastError())

#endif
