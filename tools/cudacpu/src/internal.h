/* internal.h (cudacpu) — what the runtime's files share and neither kernels nor host programs
 * see: the one lock, the configuration read from the environment, the counters, the errors.
 *
 * Invariants: every CUDA API entry point takes api_mutex before it touches streams,
 * allocations, counters or the scheduler, and holds it while work runs, so host threads may
 * call CUDA concurrently and blocks of all launches run one at a time. The configuration is
 * read once, at start, and an invalid value ends the process with a message (a run under an
 * order or mode the user did not ask for would report a result that means nothing). */
#ifndef CUDACPU_INTERNAL_H
#define CUDACPU_INTERNAL_H

#include "cuda_runtime.h"

#include <mutex>
#include <string>

namespace cudacpu {

extern std::mutex api_mutex;
typedef std::lock_guard<std::mutex> api_lock;

/* ------------------------------------------------------------ configuration (config.cpp) */

enum schedule_order { ORDER_FWD, ORDER_REV, ORDER_RAND, ORDER_WARPFWD, ORDER_WARPREV };

struct config_t {
    schedule_order order;      /* CUDACPU_SCHEDULE */
    unsigned long long seed;   /* CUDACPU_SEED: the rand order's seed of a launch's first block */
    int stats;                 /* CUDACPU_STATS: 0, 1 summary at exit, 2 also kernel names */
    bool strict_exit;          /* CUDACPU_STRICT_EXIT */
    unsigned long long mem;    /* CUDACPU_MEM_MIB in bytes: the device memory reported and enforced */
    int devices;               /* CUDACPU_DEVICES */
    bool deferred;             /* CUDACPU_STREAMS=deferred */
    bool shared_poison;        /* CUDACPU_SHARED_POISON */
    int arch;                  /* CUDACPU_ARCH: the device's compute capability, 10 * major + minor */
    int driver;                /* CUDACPU_DRIVER: the CUDA version the driver supports, 1000 * major + 10 * minor */
    const char *launch_log;    /* CUDACPU_LAUNCH_LOG: the file of each kernel's largest block, or nullptr */
};
/* The CUDA version of the runtime emulated (cudaRuntimeGetVersion): a driver that supports an
 * older major version refuses it (cudaErrorInsufficientDriver), as CUDA's minor-version
 * compatibility rule says. */
enum { RUNTIME_VERSION = 13000 };
const config_t &cfg();

/* ------------------------------------------------------------ counters and errors (device.cpp) */

extern cudacpu_counters counts;     /* since start or the last cudacpu_counts_reset; under api_mutex */
/* The counters since start, resets ignored (CUDACPU_STATS, cudacpu_kernels_run). */
cudacpu_counters counts_since_start();

/* Records e as the calling thread's last error (cudaGetLastError) unless it is cudaSuccess;
 * returns e. */
cudaError_t set_err(cudaError_t e);
/* The calling thread's last error, without clearing it. */
cudaError_t peek_err();
/* A kernel failure: its message printed, kept for cudaGetErrorString, and (deferred mode)
 * held until the next synchronising call reports it. */
void note_launch_failure(const std::string &msg);
/* The failure the next synchronising call reports in deferred mode (then cudaSuccess). */
cudaError_t take_unreported();

/* ------------------------------------------------------------ the launch log (launch_log.cpp) */

/* Records a submitted launch (ctx: its closure, which names it until it ran; may be null). */
void log_launch(const char *name, const launch_config &c, const void *ctx);
/* Adds n WMMA products to the record of the launch whose closure is ctx, and forgets ctx. */
void log_ran(const void *ctx, unsigned long long n);
/* WMMA products made since start (wmma.cpp). */
unsigned long long wmma_products();

/* ------------------------------------------------------------ kernels (grid.cpp) */

/* Runs every block of a launch now; returns cudaSuccess or cudaErrorLaunchFailure (after
 * note_launch_failure). */
cudaError_t run_grid(const launch_config &c, void (*fn)(void *), void *ctx, const char *name);
/* 0 when c is a configuration a GPU would launch, else a message. */
const char *bad_config(const launch_config &c);

/* ------------------------------------------------------------ streams (streams.cpp) */

/* The stream a handle names (NULL: the legacy default stream), or nullptr when the handle was
 * never created or is destroyed. */
CUstream_st *stream_of(cudaStream_t s);
void queue_kernel(CUstream_st *s, const launch_config &c, const char *name, void (*call)(void *),
                  void (*destroy)(void *), void *ctx);
/* A copy of n bytes; src_snapshot (owned, may be null) replaces src when set. Runs at once
 * when wait is true (or in sync mode); returns the error of the work it ran. */
cudaError_t queue_copy(CUstream_st *s, void *dst, const void *src, char *src_snapshot, size_t n, bool wait);
cudaError_t queue_fill(CUstream_st *s, void *dst, int value, size_t n);
/* Runs every queued piece of work of every stream (failures are reported by the caller, from
 * take_unreported). */
cudaError_t run_all_streams();

/* ------------------------------------------------------------ memory (memory.cpp) */

bool is_device_range(const void *p, size_t n);
bool is_pinned_range(const void *p, size_t n);

} // namespace cudacpu

#endif
