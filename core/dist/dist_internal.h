/* dist_internal.h — the tr_dist record, shared by the MPI part (dist_mpi.c) and the NCCL
 * part (dist_nccl.c) of core/dist. Not part of the public header: it names MPI types. */
#ifndef TR_DIST_INTERNAL_H
#define TR_DIST_INTERNAL_H

#include "dist.h"

#ifdef TR_HAVE_MPI
#include <mpi.h>
#endif

struct tr_dist {
    int rank, size, local_rank;
    int mpi_on; /* this process called MPI_Init and must finalize */
    double timeout_s;
    int64_t check_in_seq; /* how many check-ins so far: ranks must agree */
#ifdef TR_HAVE_MPI
    MPI_Comm comm; /* a duplicate of MPI_COMM_WORLD, private to trainer */
#endif
    tr_tensor *bucket[2];  /* the MPI path's host bucket buffers (tag workspace) */
    int64_t bucket_floats; /* capacity of each */
    void *nccl;            /* the NCCL state (dist_nccl.c), NULL when off */
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

/* Seconds on the monotonic clock. */
double tr_dist_now(void);

/* buf[0..nbytes) of host memory on every rank becomes root's (with the timeout). */
int tr_dist_bcast_bytes(tr_dist *d, tr_ctx *ctx, void *buf, size_t nbytes, int root);

/* The NCCL part: the gradient all-reduce of CUDA tensors, and the release of its state. */
int tr_dist_nccl_allreduce(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n, int64_t bucket_bytes);
void tr_dist_nccl_release(tr_dist *d);

#endif
