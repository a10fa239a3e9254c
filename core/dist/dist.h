/* dist.h — data-parallel collectives for a run launched by mpirun: one process per rank,
 * MPI for the launch and for CPU collectives, NCCL (loaded at run time) for GPU ones.
 *
 * A tr_dist is the process's membership of the job: its rank, the world size and the
 * rank within its machine (for cuda:<local rank>), the timeout every wait is bounded by,
 * the two bucket buffers of the gradient all-reduce and the time spent in it. Without
 * mpirun (or in a build without MPI) tr_dist_init gives a world of one whose collectives
 * are no-ops, so the same code runs single-process.
 *
 * Faults: no call waits longer than the timeout. A rank that does not arrive is named in
 * the error (tr_dist_check_in sends a small message to every rank and waits for theirs);
 * after such an error the job cannot continue: the caller prints it and calls
 * tr_dist_abort, which ends every rank (MPI_Abort), never a silent hang.
 *
 * Errors are reported in ctx's error record (tr_ctx_err): TR_EUSER for a fault a user
 * acts on (a dead or hung rank, a build without MPI or NCCL), TR_EINTERNAL when an MPI,
 * NCCL or CUDA call fails. Every function returns 0 on success. */
#ifndef TR_DIST_H
#define TR_DIST_H

#include "tensor.h"

typedef struct tr_dist tr_dist;

/* What the collectives cost so far (since tr_dist_init). */
typedef struct tr_dist_stats {
    double allreduce_seconds;   /* wall time inside tr_dist_allreduce_grads */
    double check_in_seconds;    /* wall time waiting in tr_dist_check_in (stragglers) */
    int64_t allreduce_bytes;    /* gradient bytes reduced (per rank) */
    int64_t allreduce_calls;    /* calls of tr_dist_allreduce_grads */
    int64_t buckets;            /* buckets issued */
    int64_t buckets_overlapped; /* of them, issued while backward was still running (tr_dist_grads_ready) */
    int64_t buffer_bytes;       /* bucket buffers held (tag workspace), host or device */
} tr_dist_stats;

/* 1 when this build has MPI (Open MPI found at build time), else 0. */
int tr_dist_have_mpi(void);
/* 1 when this build can use NCCL (CUDA backend on; libnccl is loaded at run time). */
int tr_dist_have_nccl(void);
/* The world size the launcher put in the environment (mpirun: OMPI_COMM_WORLD_SIZE, also
 * PMI_SIZE / PMIX_SIZE), or 0 when this process was not started by a launcher. */
int tr_dist_launched_size(void);

/* Joins the job (MPI_Init when launched by mpirun, else a world of one); timeout_s > 0
 * bounds every wait. TR_EUSER when launched by mpirun in a build without MPI. */
int tr_dist_init(tr_ctx *ctx, double timeout_s, tr_dist **out);
/* Leaves the job normally (MPI_Finalize) and frees d and its buffers; NULL is a no-op. */
void tr_dist_free(tr_dist *d);
/* Ends every rank of the job with exit status code (MPI_Abort); returns only in a world
 * of one without MPI, after freeing nothing (the process is about to exit). */
void tr_dist_abort(tr_dist *d, int code);

int tr_dist_rank(const tr_dist *d);
int tr_dist_size(const tr_dist *d);
int tr_dist_local_rank(const tr_dist *d);
void tr_dist_set_timeout(tr_dist *d, double timeout_s);

/* Waits until every rank has reached the same point (a barrier with a timeout). `where`
 * names the point in the error, which lists the ranks that did not arrive in time. */
int tr_dist_check_in(tr_dist *d, tr_ctx *ctx, const char *where);

/* t's bytes on every rank become root's (any dtype, CPU or CUDA tensors: a CUDA tensor is
 * staged through host memory). */
int tr_dist_broadcast(tr_dist *d, tr_ctx *ctx, tr_tensor *t, int root);

/* buf[0..n) = the sum over ranks of buf[0..n) (doubles: the step's loss, token count and
 * flags, which every rank must agree on). */
int tr_dist_allreduce_sum_f64(tr_dist *d, tr_ctx *ctx, double *buf, int n, const char *where);

/* Every f32 tensor of grads[0..n) becomes the mean over ranks of that tensor (DDP's
 * average), reduced in buckets of at most bucket_bytes, last tensor first (the order in
 * which backward completes them). On the CPU (MPI): bucket k+1 is packed while bucket k
 * is in flight (MPI_Iallreduce into one of two buffers); on CUDA with NCCL (after
 * tr_dist_use_nccl): each bucket is one NCCL group on its own stream, ordered after the
 * compute stream and before it again. */
int tr_dist_allreduce_grads(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n, int64_t bucket_bytes);

/* The same all-reduce in three calls, so that buckets start while backward is running (DDP):
 *   begin   before the backward of the step's last micro-batch: grads[0..n) and the buckets;
 *           nothing is sent yet (grads must stay alive until finish);
 *   ready   grads[first_final..n) are final (backward will not write them again): every
 *           bucket whose floats all lie there is issued now, in order;
 *   finish  before the optimizer step: the other buckets are issued and every bucket is
 *           waited for; the gradients are then the mean over ranks.
 * Every rank must make the same calls (the collectives are matched by order). begin while a
 * previous step's all-reduce is unfinished (an error between begin and finish) finishes it
 * first. With no ready call this is tr_dist_allreduce_grads, bit for bit. */
int tr_dist_grads_begin(tr_dist *d, tr_ctx *ctx, tr_tensor *const *grads, int n, int64_t bucket_bytes);
int tr_dist_grads_ready(tr_dist *d, tr_ctx *ctx, int first_final);
int tr_dist_grads_finish(tr_dist *d, tr_ctx *ctx);

/* Switches the gradient all-reduce of CUDA tensors on `device` to NCCL: loads libnccl,
 * rank 0's unique id is broadcast over MPI (a world of one makes its own). TR_EUSER when
 * the build has no CUDA backend or libnccl cannot be loaded. */
int tr_dist_use_nccl(tr_dist *d, tr_ctx *ctx, int device);

/* Bytes the bucket buffers of tr_dist_allreduce_grads take for gradients of total_bytes
 * in buckets of bucket_bytes (MPI: two buffers of one bucket; NCCL: none, in place). */
int64_t tr_dist_buffer_bytes(int64_t total_bytes, int64_t bucket_bytes, int nccl);

void tr_dist_get_stats(const tr_dist *d, tr_dist_stats *out);

#endif
