/* dist_internal.h — the tr_dist record, shared by the MPI part (dist_mpi.c) and the NCCL
 * part (dist_nccl.c) of core/dist. Not part of the public header: it names MPI types. */
#ifndef TR_DIST_INTERNAL_H
#define TR_DIST_INTERNAL_H

#include "dist.h"

#ifdef TR_HAVE_MPI
#include <mpi.h>
#endif

/* A place in the gradients' stream of floats (last tensor first). */
typedef struct tr_dist_cursor {
    int i;       /* tensor index, counting down */
    int64_t off; /* element offset inside grads[i] */
} tr_dist_cursor;

/* The all-reduce of one step, from tr_dist_grads_begin to tr_dist_grads_finish (dist_grads.c).
 * MPI: bucket k covers floats [k*cap, (k+1)*cap) of the stream and goes through host buffer
 * k % 2; it is issued once backward has made all its floats final. NCCL: tensors
 * grads[next_nccl + 1 ..) are issued, the rest not yet. */
typedef struct tr_dist_pending {
    int active;
    int mode;          /* TR_DIST_MPI_BUCKETS, TR_DIST_NCCL or TR_DIST_STAGED */
    tr_tensor **grads; /* a copy of the caller's list (owned) */
    int n;
    int64_t total, cap, chunks; /* floats, floats per bucket, buckets */
    int64_t issued, done;       /* buckets issued, buckets waited for and unpacked */
    tr_dist_cursor pack;        /* where the next bucket to issue starts */
    tr_dist_cursor start[2];    /* where each buffer's bucket starts */
    int64_t len[2];
    int next_nccl; /* NCCL: the last tensor not yet issued */
    int64_t bucket_bytes;
#ifdef TR_HAVE_MPI
    MPI_Request req[2];
#endif
} tr_dist_pending;

enum { TR_DIST_MPI_BUCKETS = 1, TR_DIST_NCCL = 2, TR_DIST_STAGED = 3 };

struct tr_dist {
    int rank, size, local_rank;
    int mpi_on; /* this process called MPI_Init and must finalize */
    double timeout_s;
    int64_t check_in_seq; /* how many check-ins so far: ranks must agree */
#ifdef TR_HAVE_MPI
    MPI_Comm comm; /* a duplicate of MPI_COMM_WORLD, private to trainer */
#endif
    tr_tensor *bucket[2];    /* the MPI path's host bucket buffers (tag workspace) */
    int64_t bucket_floats;   /* capacity of each */
    void *nccl;              /* the NCCL state (dist_nccl.c), NULL when off */
    tr_dist_pending pending; /* the step's all-reduce in progress */
    tr_dist_stats stats;
};

/* Bytes of one MPI message at most (counts are ints). */
#define TR_DIST_MAX_MSG_BYTES ((int64_t)1 << 30)

#ifdef TR_HAVE_MPI
/* An MPI call's failure as ctx's error (TR_EINTERNAL, naming the call); returns it. */
int tr_dist_mpi_fail(tr_ctx *ctx, const char *call, int rc);
/* Polls *req until it completes, within the timeout: 0, or the error (TR_EUSER on a
 * timeout, saying that a rank has died or hangs; `what` names the operation). */
int tr_dist_mpi_wait(tr_dist *d, tr_ctx *ctx, MPI_Request *req, const char *what);
#endif

/* Ends the MPI job and frees d (dist_mpi.c); what sits on it is released first by
 * tr_dist_free (dist_grads.c). */
void tr_dist_mpi_end(tr_dist *d);

/* Seconds on the monotonic clock. */
double tr_dist_now(void);

/* buf[0..nbytes) of host memory on every rank becomes root's (with the timeout). */
int tr_dist_bcast_bytes(tr_dist *d, tr_ctx *ctx, void *buf, size_t nbytes, int root);

/* The NCCL part: the gradient all-reduce of CUDA tensors, and the release of its state.
 * issue: grads[lo..hi) (last first, in groups of whole tensors up to bucket_bytes) on the
 * NCCL stream, after the work on the compute stream so far; returns the buckets issued in
 * *buckets. wait: the compute stream waits for every issued bucket, and the host for them
 * (with the timeout). */
int tr_dist_nccl_issue(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int lo, int hi, int64_t bucket_bytes,
                       int64_t *buckets);
int tr_dist_nccl_wait(tr_dist *d, tr_ctx *ctx);
/* Drops the step's pending all-reduce state (after its wait, or at the end of the job). */
void tr_dist_pending_release(tr_dist *d);
void tr_dist_nccl_release(tr_dist *d);

#endif
