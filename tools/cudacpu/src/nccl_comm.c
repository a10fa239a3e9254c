/* nccl_comm.c (cudacpu) — the NCCL stand-in's communicators: the unique id, ncclCommInitRank,
 * ncclCommDestroy and ncclCommAbort, the queries, and the errors (ncclGetErrorString,
 * ncclGetLastError, ncclCommGetAsyncError).
 *
 * The unique id is a marker, 16 random bytes (the shared segment's name) and the maker's pid:
 * an id that did not come from ncclGetUniqueId (all zero: never broadcast) is refused with
 * ncclInvalidArgument; ranks given different ids each wait alone and fail at the timeout, as
 * the real library would hang. A communicator lives while its handle or a collective queued on
 * a stream holds it: ncclCommDestroy lets the queued ones run (the real library's
 * ncclCommFinalize flushes them), ncclCommAbort makes them end at once, leaving their outputs
 * filled with 0xff bytes (NaN in every floating type), and makes the other ranks' waits end
 * with ncclRemoteError. Either returns at once. */
#include "nccl_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

static const char id_marker[16] = "cudacpu-nccl-id";

/* ------------------------------------------------------------ errors */

static pthread_mutex_t last_error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[1024];

ncclResult_t nc_fail(ncclResult_t r, const char *fmt, ...)
{
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudacpu: NCCL WARN %s\n", msg);
    pthread_mutex_lock(&last_error_lock);
    memcpy(last_error, msg, sizeof msg);
    pthread_mutex_unlock(&last_error_lock);
    return r;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    /* the real library's texts */
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm; /* as in the real library, the last error of the process */
    return last_error;
}

/* ------------------------------------------------------------ the id, the version */

ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return nc_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id) return nc_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    memset(id, 0, sizeof *id);
    memcpy(id->internal, id_marker, sizeof id_marker);
    if (getrandom(id->internal + 16, 16, 0) != 16) return nc_fail(ncclSystemError, "ncclGetUniqueId: getrandom failed");
    const int32_t pid = (int32_t)getpid();
    memcpy(id->internal + 32, &pid, sizeof pid);
    return ncclSuccess;
}

/* ------------------------------------------------------------ communicators */

/* the emulated runtime's current device, from the program (0 without the runtime) */
static int current_device(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "cudaGetDevice");
    int (*get)(int *);
    memcpy(&get, &sym, sizeof get);
    int d = 0;
    if (get && get(&d) != 0) d = 0;
    return d;
}

void nc_comm_release(struct ncclComm *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    /* the last reference: no collective of c is queued any more */
    if (c->seg && munmap(c->seg, c->seg_bytes) != 0) perror("cudacpu: NCCL WARN munmap");
    c->magic = 0;
    free(c);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    if (!comm) return nc_fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
    *comm = NULL;
    if (nranks < 1 || nranks > NC_MAX_RANKS)
        return nc_fail(ncclInvalidArgument, "ncclCommInitRank: nranks %d (the stand-in has 1 to %d)", nranks,
                       NC_MAX_RANKS);
    if (rank < 0 || rank >= nranks)
        return nc_fail(ncclInvalidArgument, "ncclCommInitRank: rank %d is not in [0, %d)", rank, nranks);
    if (memcmp(id.internal, id_marker, sizeof id_marker) != 0) {
        return nc_fail(ncclInvalidArgument,
                       "ncclCommInitRank (rank %d): the unique id did not come from ncclGetUniqueId%s", rank,
                       id.internal[0] == 0 ? " (it is zero: was rank 0's id broadcast to this rank?)" : "");
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return nc_fail(ncclSystemError, "ncclCommInitRank: out of host memory");
    c->magic = NC_COMM_MAGIC;
    atomic_init(&c->refs, 1);
    c->rank = rank;
    c->nranks = nranks;
    c->device = current_device();
    ncclResult_t r = nc_segment_join(c, &id);
    if (r != ncclSuccess) {
        nc_comm_release(c);
        return r;
    }
    *comm = c;
    return ncclSuccess;
}

/* c is a communicator handle ncclCommInitRank made and nobody destroyed or aborted */
static int live(const struct ncclComm *c)
{
    return c && c->magic == NC_COMM_MAGIC;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess; /* as the real library */
    if (!live(comm)) return nc_fail(ncclInvalidArgument, "ncclCommDestroy: not a live communicator");
    comm->magic = 0x44454144u; /* a queued collective still runs; the handle is gone */
    nc_comm_release(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!live(comm)) return nc_fail(ncclInvalidArgument, "ncclCommAbort: not a live communicator");
    atomic_store(&comm->aborted, 1);
    nc_segment_mark_failed(comm, 1);
    comm->magic = 0x41424f52u;
    nc_comm_release(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!live(comm) || !asyncError) return nc_fail(ncclInvalidArgument, "ncclCommGetAsyncError: bad argument");
    *asyncError = (ncclResult_t)atomic_load(&comm->async_error);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!live(comm) || !count) return nc_fail(ncclInvalidArgument, "ncclCommCount: bad argument");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!live(comm) || !device) return nc_fail(ncclInvalidArgument, "ncclCommCuDevice: bad argument");
    *device = comm->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!live(comm) || !rank) return nc_fail(ncclInvalidArgument, "ncclCommUserRank: bad argument");
    *rank = comm->rank;
    return ncclSuccess;
}

int nc_comm_live(const struct ncclComm *c)
{
    return live(c);
}
