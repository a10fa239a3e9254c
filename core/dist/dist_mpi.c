/* dist_mpi.c — the job and its small collectives over MPI (dist.h): init and finalize (the
 * end of tr_dist_free, which releases what sits on the job first, in dist_grads.c),
 * rank, world and local rank, a check-in (barrier) that names the ranks that did not
 * arrive, broadcast and a small f64 sum; the waits with a timeout that dist_grads.c's
 * gradient all-reduce shares.
 *
 * Every wait is a nonblocking MPI call polled until it completes or the timeout passes
 * (MPI itself has no timeouts): a dead or hung rank becomes an error on the others, which
 * the caller turns into tr_dist_abort. MPI errors are returned, not fatal: the private
 * communicator has MPI_ERRORS_RETURN.
 *
 * Without TR_HAVE_MPI (a build without Open MPI) every world has one rank: the collectives
 * do nothing and a launch by mpirun with more than one rank is refused. */
#include "dist_internal.h"
#include "tensor_version.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

enum { TAG_CHECK_IN = 7101 };

double tr_dist_now(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux; a failure would only make timeouts longer */
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end != '\0' || x < 0 || x > INT_MAX) return 0;
    return (int)x;
}

int tr_dist_launched_size(void)
{
    int n = env_int("OMPI_COMM_WORLD_SIZE");
    if (n == 0) n = env_int("PMI_SIZE");
    return n;
}

int tr_dist_have_mpi(void)
{
#ifdef TR_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int tr_dist_rank(const tr_dist *d)
{
    return d ? d->rank : 0;
}
int tr_dist_size(const tr_dist *d)
{
    return d ? d->size : 1;
}
int tr_dist_local_rank(const tr_dist *d)
{
    return d ? d->local_rank : 0;
}

void tr_dist_set_timeout(tr_dist *d, double timeout_s)
{
    if (d && timeout_s > 0) d->timeout_s = timeout_s;
}

void tr_dist_get_stats(const tr_dist *d, tr_dist_stats *out)
{
    if (!out) return;
    if (!d) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = d->stats;
}

#ifdef TR_HAVE_MPI
/* ---------------------------------------------------------------- MPI helpers */
int tr_dist_mpi_fail(tr_ctx *ctx, const char *call, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error code %d", rc);
    return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL, "distributed: %s failed: %s", call, s);
}

#define MPI_TRY(ctx, call)                                                                                             \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) return tr_dist_mpi_fail(ctx, #call, rc_);                                              \
    } while (0)

/* Between tests of a request. In a check-in a rank may wait long for a slower one: spin
 * briefly, then sleep a little, leaving the core to it (ranks share a machine's cores).
 * Inside a collective every rank is present and MPI advances it only while it is tested:
 * yield the core but test again at once. */
static void pause_briefly(int spins, int in_collective)
{
    if (spins < 2000) return;
    if (in_collective) {
        /* sched_yield cannot fail on Linux */
        (void)sched_yield();
        return;
    }
    struct timespec ts = {0, spins < 20000 ? 20000 : 200000};
    /* an early wake-up (EINTR) only shortens the pause */
    (void)nanosleep(&ts, NULL);
}

/* Polls *req until it completes (1) or the deadline passes (0); -1 with ctx's error set
 * when MPI_Test fails. */
static int wait_request(tr_ctx *ctx, MPI_Request *req, double deadline)
{
    for (int spins = 0;; spins++) {
        int flag = 0;
        int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            tr_dist_mpi_fail(ctx, "MPI_Test", rc);
            return -1;
        }
        if (flag) return 1;
        if (tr_dist_now() > deadline) return 0;
        pause_briefly(spins, 1);
    }
}

static int timed_out(tr_dist *d, tr_ctx *ctx, const char *what)
{
    return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                   "distributed: %s did not complete within %g s on rank %d of %d: a rank has died or hangs. "
                   "The run stops on every rank; look above for that rank's own message. When a rank is only "
                   "slow (a long evaluation or checkpoint on rank 0), raise distributed.timeout (seconds).",
                   what, d->timeout_s, d->rank, d->size);
}

int tr_dist_mpi_wait(tr_dist *d, tr_ctx *ctx, MPI_Request *req, const char *what)
{
    int r = wait_request(ctx, req, tr_dist_now() + d->timeout_s);
    if (r < 0) return TR_EINTERNAL;
    if (r == 0) return timed_out(d, ctx, what);
    return 0;
}
#endif

/* ---------------------------------------------------------------- the job */
int tr_dist_init(tr_ctx *ctx, double timeout_s, tr_dist **out)
{
    *out = NULL;
    int launched = tr_dist_launched_size();
#ifndef TR_HAVE_MPI
    if (launched > 1) {
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "distributed: this process was started by mpirun as one of %d ranks, but this build of trainer "
                       "has no MPI. Install Open MPI (scripts/deps.sh, or apt-get install openmpi-bin libopenmpi-dev) "
                       "and rebuild with make; or run one process, without mpirun.",
                       launched);
    }
#endif
    tr_dist *d = calloc(1, sizeof *d);
    if (!d) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory for the job's record");
    d->size = 1;
    d->timeout_s = timeout_s > 0 ? timeout_s : 300;
#ifdef TR_HAVE_MPI
    if (launched > 0) {
        int inited = 0, rc = MPI_Initialized(&inited);
        if (rc == MPI_SUCCESS && !inited) rc = MPI_Init(NULL, NULL);
        if (rc != MPI_SUCCESS) {
            free(d);
            return tr_dist_mpi_fail(ctx, "MPI_Init", rc);
        }
        d->mpi_on = !inited;
        MPI_Comm node = MPI_COMM_NULL;
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->comm)) != MPI_SUCCESS ||
            (rc = MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
            (rc = MPI_Comm_rank(d->comm, &d->rank)) != MPI_SUCCESS ||
            (rc = MPI_Comm_size(d->comm, &d->size)) != MPI_SUCCESS ||
            (rc = MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node)) != MPI_SUCCESS ||
            (rc = MPI_Comm_rank(node, &d->local_rank)) != MPI_SUCCESS || (rc = MPI_Comm_free(&node)) != MPI_SUCCESS) {
            tr_dist_mpi_fail(ctx, "setting up the MPI communicator", rc);
            MPI_Abort(MPI_COMM_WORLD, 1);
            free(d);
            return TR_EINTERNAL;
        }
    } else {
        d->comm = MPI_COMM_NULL;
    }
#endif
    *out = d;
    return 0;
}

/* The end of tr_dist_free (dist_grads.c), once the gradient state and NCCL are released. */
void tr_dist_mpi_end(tr_dist *d)
{
#ifdef TR_HAVE_MPI
    /* the job is over: a failure here has no one left to tell */
    if (d->comm != MPI_COMM_NULL) (void)MPI_Comm_free(&d->comm);
    if (d->mpi_on) (void)MPI_Finalize();
#endif
    free(d);
}

void tr_dist_abort(tr_dist *d, int code)
{
#ifdef TR_HAVE_MPI
    if (d && d->comm != MPI_COMM_NULL) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
#else
    (void)d;
    (void)code;
#endif
}

/* ---------------------------------------------------------------- check-in */
int tr_dist_check_in(tr_dist *d, tr_ctx *ctx, const char *where)
{
    if (d->size == 1) return 0;
#ifdef TR_HAVE_MPI
    double t0 = tr_dist_now(), deadline = t0 + d->timeout_s;
    int n = d->size;
    d->check_in_seq++;
    /* on a timeout these stay allocated: their requests are still posted and the job is
     * about to be aborted */
    int64_t *got = calloc((size_t)n + 1, sizeof *got);
    MPI_Request *reqs = calloc(2 * (size_t)n, sizeof *reqs);
    if (!got || !reqs) {
        free(got);
        free(reqs);
        return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory for a check-in");
    }
    int64_t *mine = &got[n];
    *mine = d->check_in_seq;
    for (int r = 0; r < n; r++) {
        reqs[r] = reqs[n + r] = MPI_REQUEST_NULL;
        if (r == d->rank) continue;
        MPI_TRY(ctx, MPI_Irecv(&got[r], 1, MPI_INT64_T, r, TAG_CHECK_IN, d->comm, &reqs[r]));
        MPI_TRY(ctx, MPI_Isend(mine, 1, MPI_INT64_T, r, TAG_CHECK_IN, d->comm, &reqs[n + r]));
    }
    int pending = n - 1;
    for (int spins = 0; pending > 0; spins++) {
        for (int r = 0; r < n; r++) {
            if (reqs[r] == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_TRY(ctx, MPI_Test(&reqs[r], &flag, MPI_STATUS_IGNORE));
            if (flag) pending--;
        }
        if (pending == 0) break;
        if (tr_dist_now() > deadline) {
            char missing[512] = "";
            size_t used = 0;
            int count = 0;
            for (int r = 0; r < n && used + 16 < sizeof missing; r++) {
                if (reqs[r] == MPI_REQUEST_NULL) continue;
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", count ? ", " : "", r);
                count++;
            }
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "distributed: rank%s %s did not reach %s within %g s (rank %d of %d waited for %s): it has "
                           "died or hangs. The run stops on every rank; look above for that rank's own message. When "
                           "it is only slow (a long evaluation or checkpoint on rank 0), raise distributed.timeout "
                           "(seconds).",
                           count > 1 ? "s" : "", missing, where, d->timeout_s, d->rank, n, count > 1 ? "them" : "it");
        }
        pause_briefly(spins, 0);
    }
    for (int r = 0; r < n; r++) {
        if (reqs[n + r] == MPI_REQUEST_NULL) continue;
        int w = wait_request(ctx, &reqs[n + r], deadline);
        if (w < 0) return TR_EINTERNAL;
        if (w == 0) return timed_out(d, ctx, "a check-in message");
    }
    int bad = -1;
    for (int r = 0; r < n; r++) {
        if (r != d->rank && got[r] != *mine) bad = r;
    }
    int64_t theirs = bad >= 0 ? got[bad] : 0, ours = *mine;
    free(got);
    free(reqs);
    d->stats.check_in_seconds += tr_dist_now() - t0;
    if (bad >= 0) {
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "distributed: rank %d is at its check-in %lld and rank %d at %lld (%s): the ranks are out of "
                       "step. A recipe's loop or hook must run the same training steps on every rank.",
                       bad, (long long)theirs, d->rank, (long long)ours, where);
    }
    return 0;
#else
    (void)ctx;
    (void)where;
    return 0;
#endif
}

/* ---------------------------------------------------------------- broadcast, sums */
int tr_dist_bcast_bytes(tr_dist *d, tr_ctx *ctx, void *buf, size_t nbytes, int root)
{
    if (d->size == 1) return 0;
#ifdef TR_HAVE_MPI
    int st = 0;
    for (size_t off = 0; off < nbytes && st == 0; off += (size_t)TR_DIST_MAX_MSG_BYTES) {
        size_t len = nbytes - off < (size_t)TR_DIST_MAX_MSG_BYTES ? nbytes - off : (size_t)TR_DIST_MAX_MSG_BYTES;
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, d->comm, &req);
        st = rc != MPI_SUCCESS ? tr_dist_mpi_fail(ctx, "MPI_Ibcast", rc)
                               : tr_dist_mpi_wait(d, ctx, &req, "a broadcast from rank 0");
    }
    return st;
#else
    (void)ctx;
    (void)buf;
    (void)nbytes;
    (void)root;
    return 0;
#endif
}

int tr_dist_broadcast(tr_dist *d, tr_ctx *ctx, tr_tensor *t, int root)
{
    if (d->size == 1) return 0;
#ifdef TR_HAVE_MPI
    size_t nb = tr_tensor_nbytes(t);
    char *host = t->data, *stage = NULL;
    if (t->device != TR_CPU) {
        stage = malloc(nb ? nb : 1);
        if (!stage) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "distributed: out of host memory staging %zu bytes", nb);
        if (d->rank == root && tr_tensor_read(ctx, t, stage, nb) != 0) {
            free(stage);
            return tr_ctx_err(ctx)->status;
        }
        host = stage;
    }
    int st = tr_dist_bcast_bytes(d, ctx, host, nb, root);
    if (d->rank != root) tr_tensor_mark_written(t);   /* a packed copy must follow the received bytes */
    if (st == 0 && stage && d->rank != root && tr_tensor_write(ctx, t, stage, nb) != 0) st = tr_ctx_err(ctx)->status;
    free(stage);
    return st;
#else
    (void)ctx;
    (void)t;
    (void)root;
    return 0;
#endif
}

int tr_dist_allreduce_sum_f64(tr_dist *d, tr_ctx *ctx, double *buf, int n, const char *where)
{
    if (d->size == 1) return 0;
#ifdef TR_HAVE_MPI
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_TRY(ctx, MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, d->comm, &req));
    return tr_dist_mpi_wait(d, ctx, &req, where);
#else
    (void)ctx;
    (void)buf;
    (void)n;
    (void)where;
    return 0;
#endif
}
