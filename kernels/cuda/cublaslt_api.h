/* cublaslt_api.h — the cuBLASLt functions the CUDA backend calls, as a table of function
 * pointers that core/cuda_device/cuda_device.c fills with dlsym from TR_CUBLASLT_SONAME (then
 * libcublasLt.so) on a device's first matrix product. The binary does not link cuBLASLt:
 * loading it costs ~150 MiB of resident memory at process start, which a CPU run, a
 * `trainer check` or a REPL without a GPU never needs. The table lives in the device state
 * (no global mutable state); kernels/cuda/matmul.cu calls through it (env->api).
 *
 * cublasLt.h still gives the types and, through typeof/decltype, each pointer's exact
 * signature, so a mismatch with the header is a compile error, never a wrong call.
 * Private to the CUDA backend (gcc and nvcc both include it). */
#ifndef TR_CUBLASLT_API_H
#define TR_CUBLASLT_API_H

#include <cublasLt.h>

/* Every function of the table, once (X-macro). */
#define TR_CUBLASLT_FUNCTIONS(X)                                                                                       \
    X(cublasLtCreate)                                                                                                  \
    X(cublasLtDestroy)                                                                                                 \
    X(cublasLtMatmulDescCreate)                                                                                        \
    X(cublasLtMatmulDescDestroy)                                                                                       \
    X(cublasLtMatmulDescSetAttribute)                                                                                  \
    X(cublasLtMatrixLayoutCreate)                                                                                      \
    X(cublasLtMatrixLayoutDestroy)                                                                                     \
    X(cublasLtMatrixLayoutSetAttribute)                                                                                \
    X(cublasLtMatmulPreferenceCreate)                                                                                  \
    X(cublasLtMatmulPreferenceDestroy)                                                                                 \
    X(cublasLtMatmulPreferenceSetAttribute)                                                                            \
    X(cublasLtMatmulAlgoGetHeuristic)                                                                                  \
    X(cublasLtMatmul)

#ifdef __cplusplus
#define TR_CUBLASLT_FIELD(name) decltype(&::name) name;
#else
#define TR_CUBLASLT_FIELD(name) __typeof__(&name) name;
#endif

typedef struct tr_cublaslt_api {
    TR_CUBLASLT_FUNCTIONS(TR_CUBLASLT_FIELD)
} tr_cublaslt_api;

/* The sonames tried, in order. The first is the one the headers this build compiled against
 * describe (cublas_api.h's CUBLAS_VER_MAJOR: libcublasLt.so.12 for a CUDA 12 build), so
 * the table always meets the library it was declared from; headers without the version
 * (the CUDA emulator's stand-in) get CUDA 13's. */
#ifdef CUBLAS_VER_MAJOR
#define TR_CUBLASLT_STR_(x) #x
#define TR_CUBLASLT_STR(x)  TR_CUBLASLT_STR_(x)
#define TR_CUBLASLT_SONAME  "libcublasLt.so." TR_CUBLASLT_STR(CUBLAS_VER_MAJOR)
#else
#define TR_CUBLASLT_SONAME "libcublasLt.so.13"
#endif
#define TR_CUBLASLT_SONAME_FALLBACK "libcublasLt.so"

#endif
