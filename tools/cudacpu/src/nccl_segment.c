/* nccl_segment.c (cudacpu) — the shared segment of a communicator (nccl_internal.h): its name
 * from the unique id, making or opening it, the ranks joining it, and the one bounded wait that
 * every exchange goes through.
 *
 * A wait polls (a short spin, then sleeps growing to 1 ms), so a rank that dies cannot leave a
 * lock held. Every 100 ms it also looks at the processes of the ranks it waits for: a process
 * that has exited (or is a zombie) ends the wait with ncclRemoteError naming the rank, as the
 * real library reports a peer whose connection closed. */
#include "nccl_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ settings, clock */

double nc_timeout_s(void)
{
    static double cached;
    if (cached > 0) return cached;
    const char *s = getenv("CUDACPU_NCCL_TIMEOUT");
    double t = 60.0;
    if (s && *s) {
        char *end = NULL;
        t = strtod(s, &end);
        if (*end != '\0' || !(t > 0) || !isfinite(t)) {
            fprintf(stderr, "cudacpu: CUDACPU_NCCL_TIMEOUT=%s is not valid (accepted: a number of seconds > 0)\n", s);
            exit(2);
        }
    }
    cached = t;
    return t;
}

static double now_s(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux; a failure would only make waits longer */
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* After `spins` polls: nothing for the first few hundred, then a yield, then sleeps that
 * grow to 1 ms (ranks share the machine's cores with each other). */
static void pause_after(unsigned spins)
{
    if (spins < 200) return;
    struct timespec ts = {0, spins < 2000 ? 10000 : 1000000};
    /* an early wake-up (EINTR) only shortens the pause */
    (void)nanosleep(&ts, NULL);
}

/* 1 when process pid has exited (gone, or a zombie not yet reaped) */
static int process_gone(int pid)
{
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return close_paren && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

/* ------------------------------------------------------------ the wait */

static uint64_t counter_of(const nc_rank_slot *s, enum nc_counter counter)
{
    switch (counter) {
    case NC_PRESENT:
        return (uint64_t)atomic_load_explicit(&s->present, memory_order_acquire);
    case NC_ARRIVED:
        return atomic_load_explicit(&s->arrived, memory_order_acquire);
    default:
        return atomic_load_explicit(&s->left, memory_order_acquire);
    }
}

/* "1, 3" into out: the ranks whose counter is below target */
static void missing_ranks(const struct ncclComm *c, enum nc_counter counter, uint64_t target, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int r = 0; r < c->nranks && used + 16 < size; r++) {
        if (counter_of(&c->seg->rank[r], counter) >= target) continue;
        used += (size_t)snprintf(out + used, size - used, "%s%d", used ? ", " : "", r);
    }
}

ncclResult_t nc_wait_all(struct ncclComm *c, enum nc_counter counter, uint64_t target, const char *what)
{
    const double timeout = nc_timeout_s(), deadline = now_s() + timeout;
    double next_look = now_s() + 0.1;
    for (unsigned spins = 0;; spins++) {
        int r = 0;
        while (r < c->nranks && counter_of(&c->seg->rank[r], counter) >= target) r++;
        if (r == c->nranks) return ncclSuccess;
        if (atomic_load(&c->aborted))
            return nc_fail(ncclInvalidUsage, "rank %d: %s was cut short by ncclCommAbort", c->rank, what);
        const int32_t failed = atomic_load_explicit(&c->seg->failed, memory_order_acquire);
        const int failed_rank = (failed & 0xffff) - 1;
        if (failed && failed_rank != c->rank) {
            return nc_fail(ncclRemoteError, "rank %d: %s cannot complete: rank %d %s", c->rank, what, failed_rank,
                           (failed & NC_FAILED_BY_ABORT) ? "called ncclCommAbort" : "failed (its message says why)");
        }
        char missing[256];
        const double t = now_s();
        if (t >= next_look) {
            next_look = t + 0.1;
            for (int q = 0; q < c->nranks; q++) {
                const nc_rank_slot *s = &c->seg->rank[q];
                if (q == c->rank || counter_of(s, counter) >= target || atomic_load(&s->present) != NC_JOINED) continue;
                if (process_gone(s->pid))
                    return nc_fail(ncclRemoteError, "rank %d: %s cannot complete: rank %d (process %d) has exited",
                                   c->rank, what, q, s->pid);
            }
        }
        if (t > deadline) {
            missing_ranks(c, counter, target, missing, sizeof missing);
            const int several = strchr(missing, ',') != NULL;
            return nc_fail(ncclRemoteError,
                           "rank %d: rank%s %s did not %s %s within %g s (CUDACPU_NCCL_TIMEOUT): %s hung, "
                           "died, or called other collectives",
                           c->rank, several ? "s" : "", missing, counter == NC_PRESENT ? "join" : "reach", what,
                           timeout, several ? "they" : "it");
        }
        pause_after(spins);
    }
}

/* ------------------------------------------------------------ making and joining */

static size_t page_round(size_t n)
{
    const size_t page = 4096;
    return (n + page - 1) / page * page;
}

static size_t segment_bytes(int nranks)
{
    return page_round(sizeof(nc_segment)) + (size_t)nranks * 2 * NC_CHUNK_BYTES;
}

/* "/cudacpu-nccl-" and the hex of the id's 16 random bytes (nccl_comm.c puts them at 16..31) */
static void segment_name(const ncclUniqueId *id, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "/cudacpu-nccl-");
    for (int i = 16; i < 32 && used + 3 <= size; i++)
        used += (size_t)snprintf(out + used, size - used, "%02x", (unsigned char)id->internal[i]);
}

static void unlink_name(const char *name)
{
    /* another rank may have unlinked it first: ENOENT is that, not a failure */
    if (shm_unlink(name) != 0 && errno != ENOENT)
        fprintf(stderr, "cudacpu: NCCL WARN shm_unlink(%s): %s\n", name, strerror(errno));
}

/* The creator: sizes, maps and sets up the segment, then publishes its magic. */
static ncclResult_t create_segment(struct ncclComm *c, int fd, const char *name)
{
    const size_t bytes = segment_bytes(c->nranks);
    if (ftruncate(fd, (off_t)bytes) != 0)
        return nc_fail(ncclSystemError, "rank %d: ftruncate(%s, %zu): %s", c->rank, name, bytes, strerror(errno));
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nc_fail(ncclSystemError, "rank %d: mmap(%s): %s", c->rank, name, strerror(errno));
    c->seg = (nc_segment *)p;
    c->seg_bytes = bytes;
    c->seg->nranks = c->nranks; /* the rest is zero: ftruncate fills with zeros */
    atomic_store_explicit(&c->seg->magic, NC_SEGMENT_MAGIC, memory_order_release);
    return ncclSuccess;
}

/* A later rank: waits for the creator's set-up, checks nranks, maps the whole segment. */
static ncclResult_t open_segment(struct ncclComm *c, int fd, const char *name)
{
    const double deadline = now_s() + nc_timeout_s();
    struct stat st;
    for (unsigned spins = 0;; spins++) {
        if (fstat(fd, &st) != 0)
            return nc_fail(ncclSystemError, "rank %d: fstat(%s): %s", c->rank, name, strerror(errno));
        if ((size_t)st.st_size >= sizeof(nc_segment)) break;
        if (now_s() > deadline) return nc_fail(ncclSystemError, "rank %d: %s was never set up", c->rank, name);
        pause_after(spins);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nc_fail(ncclSystemError, "rank %d: mmap(%s): %s", c->rank, name, strerror(errno));
    c->seg = (nc_segment *)p;
    c->seg_bytes = (size_t)st.st_size;
    for (unsigned spins = 0; atomic_load_explicit(&c->seg->magic, memory_order_acquire) != NC_SEGMENT_MAGIC; spins++) {
        if (now_s() > deadline) return nc_fail(ncclSystemError, "rank %d: %s was never set up", c->rank, name);
        pause_after(spins);
    }
    if (c->seg->nranks != c->nranks || c->seg_bytes != segment_bytes(c->nranks)) {
        return nc_fail(ncclInvalidUsage,
                       "rank %d called ncclCommInitRank with nranks %d, but the communicator of this unique id was "
                       "made with nranks %d",
                       c->rank, c->nranks, c->seg->nranks);
    }
    return ncclSuccess;
}

ncclResult_t nc_segment_join(struct ncclComm *c, const ncclUniqueId *id)
{
    char name[64];
    segment_name(id, name, sizeof name);
    int created = 1;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        created = 0;
        fd = shm_open(name, O_RDWR, 0600);
    }
    if (fd < 0) return nc_fail(ncclSystemError, "rank %d: shm_open(%s): %s", c->rank, name, strerror(errno));
    ncclResult_t r = created ? create_segment(c, fd, name) : open_segment(c, fd, name);
    /* the mapping keeps the segment; the descriptor is no longer needed */
    if (close(fd) != 0 && r == ncclSuccess)
        r = nc_fail(ncclSystemError, "rank %d: close: %s", c->rank, strerror(errno));
    if (r != ncclSuccess) {
        unlink_name(name);
        return r;
    }
    c->buffers = (char *)c->seg + page_round(sizeof(nc_segment));

    nc_rank_slot *me = &c->seg->rank[c->rank];
    int32_t expected = 0;
    if (!atomic_compare_exchange_strong(&me->present, &expected, NC_CLAIMED)) {
        unlink_name(name);
        return nc_fail(ncclInvalidUsage, "rank %d joined the communicator twice (two callers gave the same rank)",
                       c->rank);
    }
    me->pid = (int32_t)getpid();
    me->device = c->device;
    me->nranks = c->nranks;
    atomic_store_explicit(&me->present, NC_JOINED, memory_order_release);
    if (atomic_fetch_add(&c->seg->joined, 1) + 1 == c->nranks) unlink_name(name); /* the last to join */
    r = nc_wait_all(c, NC_PRESENT, NC_JOINED, "ncclCommInitRank");
    if (r != ncclSuccess) {
        unlink_name(name);
        return r;
    }
    for (int q = 0; q < c->nranks; q++) {
        if (q != c->rank && c->seg->rank[q].device == c->device) {
            /* the real library's check (init.cc), whose text this keeps */
            return nc_fail(ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d",
                           c->rank < q ? c->rank : q, c->rank < q ? q : c->rank, c->device);
        }
    }
    return ncclSuccess;
}

void nc_segment_mark_failed(struct ncclComm *c, int by_abort)
{
    if (!c->seg) return;
    int32_t none = 0;
    /* the first failure is the one the others name: a later one leaves it */
    (void)atomic_compare_exchange_strong(&c->seg->failed, &none, (c->rank + 1) | (by_abort ? NC_FAILED_BY_ABORT : 0));
}
