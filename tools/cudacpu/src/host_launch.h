/* host_launch.h (cudacpu) — how the stand-in libraries (cuBLASLt, NCCL) queue their work on a
 * program's streams: through the emulated runtime's cudaLaunchHostFunc, which is linked into the
 * program, not into them, and found among the program's exported symbols (a program linked with
 * --export-dynamic, as the project's are). NULL in a program without the runtime (the libraries'
 * own tests): the caller then does the work at the call. */
#ifndef CUDACPU_HOST_LAUNCH_H
#define CUDACPU_HOST_LAUNCH_H

#include "cuda_runtime.h"

#include <dlfcn.h>
#include <string.h>

typedef int (*cudacpu_launch_host_fn)(cudaStream_t, void (*)(void *), void *);

/* Looked up once per library (each includes this file); racing first calls find the same. */
static inline cudacpu_launch_host_fn cudacpu_host_launcher(void)
{
    static cudacpu_launch_host_fn fn;
    static int looked;
    if (!looked) {
        void *sym = dlsym(RTLD_DEFAULT, "cudaLaunchHostFunc");
        memcpy(&fn, &sym, sizeof fn);
        looked = 1;
    }
    return fn;
}

#endif
