/* device.cpp (cudacpu) — device queries, error codes and their texts, the counters
 * (cudacpu_counts), and the one lock of internal.h.
 * Invariant: a thread's last error and current device are its own (thread_local), as in CUDA;
 * everything else here is under api_mutex. */
#include "internal.h"

#include <cstdio>
#include <cstring>

namespace cudacpu {

std::mutex api_mutex;
cudacpu_counters counts;
static cudacpu_counters before_reset; /* the sum of what each reset cleared */

/* the counters are all unsigned long long: they add up field by field */
static const size_t NFIELDS = sizeof(cudacpu_counters) / sizeof(unsigned long long);
static_assert(sizeof(cudacpu_counters) % sizeof(unsigned long long) == 0, "cudacpu_counters holds only counters");

cudacpu_counters counts_since_start()
{
    cudacpu_counters t;
    unsigned long long *d = (unsigned long long *)&t;
    const unsigned long long *a = (const unsigned long long *)&counts, *b = (const unsigned long long *)&before_reset;
    for (size_t i = 0; i < NFIELDS; i++) d[i] = a[i] + b[i];
    return t;
}

static thread_local cudaError_t t_last = cudaSuccess;
static thread_local int t_device = 0;
static std::string last_failure;        /* under api_mutex */
static cudaError_t unreported = cudaSuccess; /* deferred mode: a failure no sync returned yet */

cudaError_t set_err(cudaError_t e)
{
    if (e != cudaSuccess) t_last = e;
    return e;
}

cudaError_t peek_err() { return t_last; }

void note_launch_failure(const std::string &msg)
{
    fprintf(stderr, "%s\n", msg.c_str());
    last_failure = msg;
    if (cfg().deferred) unreported = cudaErrorLaunchFailure;
}

cudaError_t take_unreported()
{
    const cudaError_t e = unreported;
    unreported = cudaSuccess;
    return e;
}

} // namespace cudacpu

using namespace cudacpu;

extern "C" {

/* A driver that supports an older CUDA major version than the runtime's refuses every device
 * call (CUDA's minor-version compatibility: a 13.x runtime needs a driver of 13.0 or newer). */
static bool driver_too_old() { return cfg().driver / 1000 < RUNTIME_VERSION / 1000; }

cudaError_t cudaGetDeviceCount(int *n)
{
    if (!n) return set_err(cudaErrorInvalidValue);
    *n = 0;
    if (driver_too_old()) return set_err(cudaErrorInsufficientDriver);
    *n = cfg().devices;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    if (!version) return set_err(cudaErrorInvalidValue);
    *version = cfg().driver;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version) return set_err(cudaErrorInvalidValue);
    *version = RUNTIME_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    if (!p) return set_err(cudaErrorInvalidValue);
    if (driver_too_old()) return set_err(cudaErrorInsufficientDriver);
    if (device < 0 || device >= cfg().devices) return set_err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudacpu (CPU emulation of an sm_%d device)", cfg().arch);
    p->totalGlobalMem = cfg().mem;
    p->sharedMemPerBlock = 48 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->major = cfg().arch / 10;
    p->minor = cfg().arch % 10;
    p->multiProcessorCount = 132;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    if (!d) return set_err(cudaErrorInvalidValue);
    *d = t_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    if (driver_too_old()) return set_err(cudaErrorInsufficientDriver);
    if (d < 0 || d >= cfg().devices) return set_err(cudaErrorInvalidDevice);
    t_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    /* the real runtime's wording, which the project's messages quote */
    if (e == cudaErrorInsufficientDriver) return "CUDA driver version is insufficient for CUDA runtime version";
    if (e == cudaErrorNoKernelImageForDevice) return "no kernel image is available for execution on the device";
    if (e == cudaErrorLaunchFailure) {
        static thread_local std::string s;
        api_lock lk(api_mutex);
        s = "unspecified launch failure (" + last_failure + ")";
        return s.c_str();
    }
    return cudaGetErrorName(e);
}

void cudacpu_counts(struct cudacpu_counters *out)
{
    api_lock lk(api_mutex);
    *out = counts;
}

void cudacpu_counts_reset(void)
{
    api_lock lk(api_mutex);
    before_reset = counts_since_start();
    memset(&counts, 0, sizeof counts);
}

unsigned long long cudacpu_kernels_run(void)
{
    api_lock lk(api_mutex);
    return counts_since_start().kernels_run;
}

const char *cudacpu_last_failure(void)
{
    static thread_local std::string s;
    api_lock lk(api_mutex);
    s = last_failure;
    return s.c_str();
}

} // extern "C"
