/* nccl_collective.c (cudacpu) — ncclAllReduce and ncclGroupStart/End in the NCCL stand-in:
 * the checks at the call, as the real library makes them, and the exchange itself, queued on
 * the call's stream.
 *
 * A collective (or a group's collectives, in call order) is one host function on its stream
 * (cudaLaunchHostFunc of the emulated runtime, found among the program's exported symbols as
 * the cuBLASLt stand-in finds it): it runs in the stream's order, after the copies and kernels
 * queued before it and, with CUDACPU_STREAMS=deferred, only when something forces the stream,
 * so a missing event wait between a compute stream and the NCCL stream reads stale data, as on
 * a GPU. A program without the emulated runtime gets the exchange at the call.
 *
 * A collective that fails (a rank that never arrives, exits, aborts or runs a different
 * collective) leaves its output and those of the collectives after it on the communicator
 * filled with 0xff bytes (NaN in floating types) and the failure in ncclCommGetAsyncError, as
 * the real library reports errors it meets on the device: the stream itself goes on. */
#include "host_launch.h"
#include "nccl_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const void *send;
    void *recv;
    size_t count;
    int dtype, op;
    uint64_t coll; /* numbered at the call */
    struct ncclComm *comm;
    cudaStream_t stream;
} nc_op;

typedef struct {
    struct ncclComm *comm; /* holds one reference until it ran */
    int n;
    nc_op ops[];
} nc_job;

/* ------------------------------------------------------------ the exchange */

static void describe(const nc_op *o, char *out, size_t size)
{
    snprintf(out, size, "collective %" PRIu64 " (ncclAllReduce of %zu %s, %s)", o->coll, o->count,
             nc_type_name(o->dtype), nc_op_name(o->op));
}

/* Every rank's chunk in buffer b is the same part of the same collective as this rank's. */
static ncclResult_t check_same_chunk(struct ncclComm *c, int b, const char *what)
{
    const nc_chunk_desc *mine = &c->seg->rank[c->rank].desc[b];
    for (int r = 0; r < c->nranks; r++) {
        const nc_chunk_desc *d = &c->seg->rank[r].desc[b];
        if (d->coll == mine->coll && d->dtype == mine->dtype && d->op == mine->op && d->count == mine->count &&
            d->offset == mine->offset)
            continue;
        return nc_fail(ncclInvalidUsage,
                       "rank %d: the ranks call different collectives: this rank's %s meets rank %d's collective "
                       "%" PRIu64 " (ncclAllReduce of %" PRIu64 " %s, %s) at its element %" PRIu64,
                       c->rank, what, r, d->coll, d->count, nc_type_name(d->dtype), nc_op_name(d->op), d->offset);
    }
    return ncclSuccess;
}

static ncclResult_t run_allreduce(struct ncclComm *c, const nc_op *o)
{
    char what[160];
    describe(o, what, sizeof what);
    const size_t esize = nc_type_size(o->dtype), per_chunk = NC_CHUNK_BYTES / esize;
    nc_rank_slot *me = &c->seg->rank[c->rank];
    for (size_t off = 0; off < o->count; off += per_chunk) {
        const size_t n = o->count - off < per_chunk ? o->count - off : per_chunk;
        const uint64_t seq = ++c->chunk_seq;
        const int b = (int)(seq & 1);
        /* buffer b last held chunk seq - 2: every rank must have read it */
        ncclResult_t r = seq > 2 ? nc_wait_all(c, NC_LEFT, seq - 2, what) : ncclSuccess;
        if (r != ncclSuccess) return r;
        memcpy(nc_buffer(c, c->rank, b), (const char *)o->send + off * esize, n * esize);
        me->desc[b] = (nc_chunk_desc){o->coll, o->dtype, o->op, o->count, off};
        atomic_store_explicit(&me->arrived, seq, memory_order_release);
        if ((r = nc_wait_all(c, NC_ARRIVED, seq, what)) != ncclSuccess) return r;
        if ((r = check_same_chunk(c, b, what)) != ncclSuccess) return r;
        const void *in[NC_MAX_RANKS];
        for (int q = 0; q < c->nranks; q++) in[q] = nc_buffer(c, q, b);
        nc_reduce(o->dtype, o->op, c->nranks, in, (char *)o->recv + off * esize, n);
        atomic_store_explicit(&me->left, seq, memory_order_release);
    }
    return ncclSuccess;
}

/* The host function: the job's collectives in order, then its reference dropped. */
static void run_job(void *arg)
{
    nc_job *j = (nc_job *)arg;
    struct ncclComm *c = j->comm;
    for (int i = 0; i < j->n; i++) {
        const nc_op *o = &j->ops[i];
        if (!atomic_load(&c->aborted) && atomic_load(&c->async_error) == ncclSuccess) {
            const ncclResult_t r = run_allreduce(c, o);
            if (r == ncclSuccess) continue;
            int none = ncclSuccess;
            (void)atomic_compare_exchange_strong(&c->async_error, &none, (int)r);
            if (!atomic_load(&c->aborted)) nc_segment_mark_failed(c, 0);
        }
        /* what a failed or aborted collective leaves is undefined: make any use of it show */
        if (o->count > 0) memset(o->recv, 0xff, o->count * nc_type_size(o->dtype));
    }
    nc_comm_release(c);
    free(j);
}

/* Queues ops[0..n) (one communicator, one stream) as one job. */
static ncclResult_t launch(const nc_op *ops, int n)
{
    nc_job *j = malloc(sizeof *j + (size_t)n * sizeof *ops);
    if (!j) return nc_fail(ncclSystemError, "out of host memory for %d collectives", n);
    j->comm = ops[0].comm;
    j->n = n;
    memcpy(j->ops, ops, (size_t)n * sizeof *ops);
    atomic_fetch_add(&j->comm->refs, 1);
    cudacpu_launch_host_fn fn = cudacpu_host_launcher();
    if (!fn) {
        run_job(j);
        return ncclSuccess;
    }
    const int e = fn(ops[0].stream, run_job, j);
    if (e != 0) {
        nc_comm_release(j->comm);
        free(j);
        return nc_fail(ncclUnhandledCudaError, "cudaLaunchHostFunc on the collective's stream failed (error %d)", e);
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------ groups */

static _Thread_local int group_depth;
static _Thread_local ncclResult_t group_error; /* the first failed call inside the group */
static _Thread_local nc_op *group_ops;
static _Thread_local int group_n, group_cap;

static void group_clear(void)
{
    free(group_ops);
    group_ops = NULL;
    group_n = group_cap = 0;
    group_error = ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0) return nc_fail(ncclInvalidUsage, "ncclGroupEnd: not in a group (no ncclGroupStart)");
    if (--group_depth > 0) return ncclSuccess;
    ncclResult_t r = group_error;
    for (int i = 1; i < group_n && r == ncclSuccess; i++) {
        if (group_ops[i].comm != group_ops[0].comm || group_ops[i].stream != group_ops[0].stream)
            r = nc_fail(ncclInvalidUsage, "a group over several communicators or streams is not modelled by the "
                                          "stand-in (tools/cudacpu/README.md)");
    }
    if (r == ncclSuccess && group_n > 0) r = launch(group_ops, group_n);
    group_clear();
    return r;
}

/* ------------------------------------------------------------ the call */

static ncclResult_t check_call(const void *send, void *recv, size_t count, int dtype, int op, ncclComm_t comm)
{
    if (!comm) return nc_fail(ncclInvalidArgument, "ncclAllReduce: comm is NULL");
    if (!nc_comm_live(comm))
        return nc_fail(ncclInvalidArgument, "ncclAllReduce: the communicator was destroyed or aborted");
    const int pending = atomic_load(&comm->async_error);
    if (pending != ncclSuccess) {
        return nc_fail((ncclResult_t)pending, "ncclAllReduce: the communicator of rank %d is in error state (%d)",
                       comm->rank, pending);
    }
    if (nc_type_size(dtype) == 0)
        return nc_fail(ncclInvalidArgument, "ncclAllReduce: invalid type %d%s", dtype,
                       dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2 ? " (fp8: not modelled by the stand-in)"
                                                                          : "");
    if (op < 0 || op >= ncclNumOps)
        return nc_fail(ncclInvalidArgument,
                       "ncclAllReduce: invalid reduction operation %d (user-made operators are "
                       "not modelled by the stand-in)",
                       op);
    if (count > 0 && (!send || !recv))
        return nc_fail(ncclInvalidArgument, "ncclAllReduce: %s is NULL", send ? "recvbuff" : "sendbuff");
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = check_call(sendbuff, recvbuff, count, (int)datatype, (int)op, comm);
    if (r != ncclSuccess) {
        if (group_depth > 0 && group_error == ncclSuccess) group_error = r;
        return r;
    }
    const nc_op o = {sendbuff, recvbuff, count, (int)datatype, (int)op, atomic_fetch_add(&comm->next_coll, 1) + 1,
                     comm,     stream};
    if (group_depth == 0) return launch(&o, 1);
    if (group_n == group_cap) {
        const int cap = group_cap ? 2 * group_cap : 16;
        nc_op *grown = realloc(group_ops, (size_t)cap * sizeof *grown);
        if (!grown) {
            if (group_error == ncclSuccess) group_error = ncclSystemError;
            return nc_fail(ncclSystemError, "out of host memory for a group of %d collectives", group_n + 1);
        }
        group_ops = grown;
        group_cap = cap;
    }
    group_ops[group_n++] = o;
    return ncclSuccess;
}
