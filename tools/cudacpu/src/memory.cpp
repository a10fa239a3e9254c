/* memory.cpp (cudacpu) — device and pinned host allocations, copies and fills.
 * Device memory is host memory from posix_memalign, one block per cudaMalloc, so that ASan
 * sees each allocation's bounds. Copies follow CUDA's documented host synchronisation:
 *   H2D from pageable memory  the source is read when queued (the host may reuse it at once)
 *   H2D from pinned memory    read when the copy runs (rewriting it before then is a bug)
 *   D2H into pageable memory  returns when the copy has run (so it forces its stream)
 *   D2H into pinned memory    lands when the copy runs (cudaMemcpy, the blocking call, waits)
 *   D2D, memset               queued
 * cudaFree and cudaFreeHost first run all queued work (CUDA's cudaFree synchronises the
 * device; a queued copy may still use the pinned buffer).
 * Invariant: allocs and pinned map each allocation's start to its size; runs under api_mutex. */
#include "internal.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace cudacpu {

static std::map<uintptr_t, size_t> allocs; /* device allocations */
static std::map<uintptr_t, size_t> pinned; /* cudaHostAlloc / cudaMallocHost */
static unsigned long long alloc_bytes;

/* 1 when [p, p + n) lies inside one allocation of m */
static bool in_one(const std::map<uintptr_t, size_t> &m, const void *p, size_t n)
{
    auto it = m.upper_bound((uintptr_t)p);
    if (it == m.begin()) return false;
    --it;
    return (uintptr_t)p >= it->first && (uintptr_t)p + n <= it->first + it->second;
}

bool is_device_range(const void *p, size_t n) { return in_one(allocs, p, n ? n : 1); }
bool is_pinned_range(const void *p, size_t n) { return in_one(pinned, p, n ? n : 1); }

static const char *kind_name(cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToHost: return "HostToHost";
    case cudaMemcpyHostToDevice: return "HostToDevice";
    case cudaMemcpyDeviceToHost: return "DeviceToHost";
    case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
    case cudaMemcpyDefault: return "Default";
    }
    return "?";
}

/* One copy through a stream; blocking_call: cudaMemcpy (returns when the copy is done, except
 * H2D from pageable memory, which returns once the source is staged). */
static cudaError_t copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t stream,
                        bool blocking_call)
{
    CUstream_st *s = stream_of(stream);
    if (!s) return set_err(cudaErrorInvalidResourceHandle);
    if ((unsigned)kind > cudaMemcpyDefault) return set_err(cudaErrorInvalidValue);
    if (kind == cudaMemcpyDefault) {
        const bool dd = is_device_range(dst, n), sd = is_device_range(src, n);
        kind = dd && sd ? cudaMemcpyDeviceToDevice
               : dd     ? cudaMemcpyHostToDevice
               : sd     ? cudaMemcpyDeviceToHost
                        : cudaMemcpyHostToHost;
    }
    const bool ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    switch (kind) {
    case cudaMemcpyHostToDevice: counts.copies_h2d++, counts.bytes_h2d += n; break;
    case cudaMemcpyDeviceToHost: counts.copies_d2h++, counts.bytes_d2h += n; break;
    case cudaMemcpyDeviceToDevice: counts.copies_d2d++, counts.bytes_d2d += n; break;
    default: counts.copies_h2h++; break;
    }
    if (!n) return cudaSuccess;
    if ((ddev && !is_device_range(dst, n)) || (sdev && !is_device_range(src, n))) {
        fprintf(stderr, "cudacpu: cudaMemcpy%s of %zu bytes: %s is not inside one device allocation\n",
                kind_name(kind), n, ddev && !is_device_range(dst, n) ? "dst" : "src");
        return set_err(cudaErrorInvalidValue);
    }
    char *snapshot = nullptr;
    bool wait = false;
    if (kind == cudaMemcpyHostToDevice) {
        const bool src_pinned = is_pinned_range(src, n);
        if (!src_pinned && cfg().deferred) {
            snapshot = new char[n];
            memcpy(snapshot, src, n);
        }
        wait = blocking_call && src_pinned;
    } else if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost) {
        wait = blocking_call || !is_pinned_range(dst, n);
    }
    const cudaError_t e = queue_copy(s, dst, src, snapshot, n, wait);
    return e == cudaSuccess ? e : set_err(e);
}

} // namespace cudacpu

using namespace cudacpu;

extern "C" {

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    api_lock lk(api_mutex);
    counts.mallocs++;
    if (!p) return set_err(cudaErrorInvalidValue);
    *p = nullptr;
    if (alloc_bytes + bytes > cfg().mem) return set_err(cudaErrorMemoryAllocation);
    void *q = nullptr;
    if (posix_memalign(&q, 256, bytes ? bytes : 1)) return set_err(cudaErrorMemoryAllocation);
    allocs[(uintptr_t)q] = bytes;
    alloc_bytes += bytes;
    *p = q;
    return cudaSuccess;
}

/* Frees p, an allocation of `table` (allocs or pinned), after running every stream's queued
 * work: CUDA's cudaFree synchronises the device, and a queued copy may still read or write a
 * pinned buffer. Its size in *bytes; false, freeing nothing, when p is not in the table. */
static bool release(std::map<uintptr_t, size_t> &table, void *p, size_t *bytes)
{
    auto it = table.find((uintptr_t)p);
    if (it == table.end()) return false;
    run_all_streams();
    *bytes = it->second;
    table.erase(it);
    free(p);
    return true;
}

cudaError_t cudaFree(void *p)
{
    api_lock lk(api_mutex);
    counts.frees++;
    if (!p) return cudaSuccess;
    size_t bytes;
    if (!release(allocs, p, &bytes)) return set_err(cudaErrorInvalidValue);
    alloc_bytes -= bytes;
    return cfg().deferred ? set_err(take_unreported()) : cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    api_lock lk(api_mutex);
    if (!free_bytes || !total) return set_err(cudaErrorInvalidValue);
    *total = cfg().mem;
    *free_bytes = cfg().mem - alloc_bytes;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    api_lock lk(api_mutex);
    counts.host_allocs++;
    if (!p) return set_err(cudaErrorInvalidValue);
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return set_err(cudaErrorMemoryAllocation);
    pinned[(uintptr_t)*p] = bytes;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void *p)
{
    api_lock lk(api_mutex);
    counts.host_frees++;
    if (!p) return cudaSuccess;
    size_t bytes;
    return release(pinned, p, &bytes) ? cudaSuccess : set_err(cudaErrorInvalidValue);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    api_lock lk(api_mutex);
    return copy(dst, src, n, kind, s, false);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    api_lock lk(api_mutex);
    return copy(dst, src, n, kind, nullptr, true);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n, cudaStream_t s)
{
    api_lock lk(api_mutex);
    return copy(dst, src, n, cudaMemcpyDeviceToDevice, s, false);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    api_lock lk(api_mutex);
    counts.memsets++;
    CUstream_st *st = stream_of(s);
    if (!st) return set_err(cudaErrorInvalidResourceHandle);
    if (!n) return cudaSuccess;
    if (!is_device_range(p, n)) {
        fprintf(stderr, "cudacpu: cudaMemset of %zu bytes outside a device allocation\n", n);
        return set_err(cudaErrorInvalidValue);
    }
    return queue_fill(st, p, v, n);
}

cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n, nullptr); }

} // extern "C"
