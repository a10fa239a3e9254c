/* nccl_internal.h (cudacpu) — what the files of the NCCL stand-in share: the shared segment
 * that carries a communicator's data between its ranks (separate processes, or threads), the
 * communicator record, the waits, the errors and the reduction.
 *
 * The segment: POSIX shared memory named from the unique id's random bytes, made by the first
 * rank to reach ncclCommInitRank and unlinked once every rank has joined (or by a rank that
 * gives up), so nothing is left in /dev/shm by a run that ends. It holds a header (one slot per
 * rank) and, per rank, two buffers of NC_CHUNK_BYTES. A collective moves in chunks: rank r
 * writes its chunk into its buffer seq % 2 with a descriptor of what it is, publishes seq in
 * `arrived`, waits until every rank has published seq, reduces every rank's buffer in rank
 * order into its own output, and publishes seq in `left`. Before it writes a buffer again (seq
 * + 2) every rank must have left seq. So every rank reduces the same bytes in the same order:
 * the results are bit-identical on every rank.
 *
 * Invariants: the segment is only ever read and written through these structs, its counters
 * through C11 atomics (lock-free, so valid between processes); a rank writes only its own slot
 * and buffers, plus the segment's `failed` word. No wait is unbounded: each ends when its
 * condition holds, the communicator is aborted (by any thread), a rank has failed or aborted,
 * a rank's process has exited, or CUDACPU_NCCL_TIMEOUT passes. */
#ifndef CUDACPU_NCCL_INTERNAL_H
#define CUDACPU_NCCL_INTERNAL_H

/* the calls of nccl.h are the library's interface; everything else here stays inside it
 * (built with -fvisibility=hidden) */
#pragma GCC visibility push(default)
#include "nccl.h"
#pragma GCC visibility pop

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum { NC_MAX_RANKS = 64 };
#define NC_CHUNK_BYTES ((size_t)1 << 20)

/* ------------------------------------------------------------ the shared segment */

/* What a rank says about the chunk in one of its buffers: the same on every rank, else the
 * ranks run different collectives (a bug the real library would hang or corrupt on). */
typedef struct {
    uint64_t coll; /* the collective's number on this communicator, from 1 */
    int32_t dtype, op;
    uint64_t count;  /* elements of the whole collective */
    uint64_t offset; /* its first element in this chunk */
} nc_chunk_desc;

typedef struct {
    _Atomic int32_t present; /* NC_CLAIMED, then NC_JOINED once pid and device are written */
    int32_t pid, device, nranks;
    _Atomic uint64_t arrived; /* the last chunk whose data the rank has published */
    _Atomic uint64_t left;    /* the last chunk the rank has finished reading */
    nc_chunk_desc desc[2];    /* of the chunk in each of its buffers */
} nc_rank_slot;

typedef struct {
    _Atomic uint32_t magic; /* NC_SEGMENT_MAGIC once its creator has set it up */
    int32_t nranks;
    _Atomic int32_t joined;
    _Atomic int32_t failed; /* 1 + the first rank that aborted or failed, | NC_FAILED_BY_ABORT; 0: none */
    nc_rank_slot rank[NC_MAX_RANKS];
} nc_segment;
enum { NC_SEGMENT_MAGIC = 0x4e43434cu, NC_CLAIMED = 1, NC_JOINED = 2, NC_FAILED_BY_ABORT = 0x10000 };

/* ------------------------------------------------------------ the communicator */

struct ncclComm {
    uint32_t magic;          /* NC_COMM_MAGIC while the handle is live */
    _Atomic int refs;        /* the handle, and each collective queued and not yet run */
    _Atomic int aborted;     /* ncclCommAbort was called (from any thread) */
    _Atomic int async_error; /* the first failure of a collective (ncclCommGetAsyncError) */
    int rank, nranks, device;
    nc_segment *seg;
    size_t seg_bytes;
    char *buffers;              /* seg + the header's pages: rank r's buffer b at (2r + b) chunks */
    _Atomic uint64_t next_coll; /* numbers collectives as they are called */
    uint64_t chunk_seq;         /* chunks run so far (collectives run one at a time) */
};
enum { NC_COMM_MAGIC = 0x434f4d4du };

/* Drops one reference; the last one unmaps the segment and frees c. */
void nc_comm_release(struct ncclComm *c);
/* 1 when c is a handle ncclCommInitRank made that is neither destroyed nor aborted */
int nc_comm_live(const struct ncclComm *c);

/* rank r's buffer b (0 or 1) */
static inline char *nc_buffer(const struct ncclComm *c, int r, int b)
{
    return c->buffers + ((size_t)r * 2 + (size_t)b) * NC_CHUNK_BYTES;
}

/* ------------------------------------------------------------ waits (nccl_segment.c) */

/* The counter of every rank a wait looks at. */
enum nc_counter { NC_PRESENT, NC_ARRIVED, NC_LEFT };

/* Waits until every rank's counter is at least target. ncclSuccess; or, with the last error
 * set (naming the ranks missing and `what`): ncclRemoteError when a rank aborted, failed or
 * exited, or the timeout passed; ncclInvalidUsage when c itself was aborted. */
ncclResult_t nc_wait_all(struct ncclComm *c, enum nc_counter counter, uint64_t target, const char *what);

/* Joins rank `rank` of nranks to the segment the id names (creating it when first): on
 * success c->seg, c->seg_bytes and c->buffers are set and every rank has joined. */
ncclResult_t nc_segment_join(struct ncclComm *c, const ncclUniqueId *id);

/* Tells the other ranks that this one failed (by_abort: ncclCommAbort), so that their waits
 * end at once instead of at the timeout. */
void nc_segment_mark_failed(struct ncclComm *c, int by_abort);

/* CUDACPU_NCCL_TIMEOUT in seconds (default 60); a value that is not a positive number ends the
 * program with status 2, as the runtime's own settings do. */
double nc_timeout_s(void);

/* ------------------------------------------------------------ errors (nccl_comm.c) */

/* Sets the text ncclGetLastError returns and prints it ("cudacpu: NCCL WARN ..."); returns r. */
ncclResult_t nc_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------ arithmetic (nccl_reduce.c) */

/* Bytes of one element; 0 for a type the stand-in does not have (fp8, out of range). */
size_t nc_type_size(int dtype);
/* The names in messages: "ncclFloat32", "ncclAvg". */
const char *nc_type_name(int dtype);
const char *nc_op_name(int op);
/* out[0..n) = in[0][i] op in[1][i] op ... op in[nranks-1][i], left to right in rank order, each
 * step rounded to the type (ncclAvg: floats pre-multiplied by 1/nranks as NCCL does, integers
 * summed then divided). out may be one of the inputs. */
void nc_reduce(int dtype, int op, int nranks, const void *const *in, void *out, size_t n);

#endif
