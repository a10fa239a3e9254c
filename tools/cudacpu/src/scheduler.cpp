/* scheduler.cpp (cudacpu) — the block scheduler of scheduler.h: barriers, warp collectives,
 * the five orders (CUDACPU_SCHEDULE), and the checks that fail a block (synccheck's rules).
 *
 * A round runs each runnable thread of a list, in list order, to its next sync point; a
 * thread that parks switches straight to the next runnable one of the round (one switch per
 * arrival, not two through the scheduler), the last back to the scheduler. Orders:
 *   fwd, rev, rand   a round is every thread (ascending, descending, a fresh seeded
 *                    permutation each round); then complete warp collectives are released,
 *                    and when none is, the block barrier.
 *   warpfwd, warprev one warp at a time (ascending or descending warps, lanes ascending)
 *                    runs round after round, its collectives released after each, until it
 *                    waits at the barrier or exits: a warp runs ahead of the others up to
 *                    the next barrier, as a GPU may schedule it.
 * Invariant: a thread's sync-point fields are valid while its state is ST_BAR or ST_WARP. */
#include "scheduler.h"

#include "fiber.h"
#include "internal.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cudacpu {

enum { ST_RUN = 0, ST_BAR = 1, ST_WARP = 2, ST_DONE = 3 };

struct cuda_thread {
    context ctx;
    int state = ST_RUN;
    uint3 tid{0, 0, 0};
    /* the sync point it waits at */
    int kind = 0, mode = 0, arg = 0, width = 32;
    unsigned mask = 0;
    uint64_t value = 0, result = 0;
    const char *file = "";
    int line = 0;
};

struct block_run {
    std::vector<cuda_thread> t; /* grows to the largest block seen; the stacks stay */
    int n = 0, live = 0, cur = -1;
    context host;               /* the OS thread's own stack, where the scheduler runs */
    void (*fn)(void *) = nullptr;
    void *ctx = nullptr;
    const int *round = nullptr; /* the round in progress */
    int round_pos = 0, round_end = 0;
    bool failed = false;
    std::string why;
    std::vector<int> order, lanes; /* order: this block's; lanes: 0, 1, ..., n - 1 */
};

static block_run R;
static unsigned long long switches;

unsigned long long fiber_switches() { return switches; }

static void fail_block(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail_block(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!R.failed) {
        R.failed = true;
        R.why = buf;
    }
}

/* ------------------------------------------------------------ rounds and switches */

/* The next runnable thread of the round, made current; -1 at the round's end. */
static int next_in_round()
{
    while (R.round_pos < R.round_end) {
        const int i = R.round[R.round_pos++];
        if (R.t[i].state == ST_RUN) {
            R.cur = i;
            threadIdx = R.t[i].tid;
            switches++;
            return i;
        }
    }
    R.cur = -1;
    return -1;
}

/* From the current thread to the next of the round, or back to the scheduler. */
static void leave(cuda_thread &me, bool finishing)
{
    const int next = next_in_round();
    context_switch(me.ctx, next >= 0 ? R.t[next].ctx : R.host, finishing);
}

static void run_round(const int *list, int count)
{
    R.round = list;
    R.round_pos = 0;
    R.round_end = count;
    const int first = next_in_round();
    if (first >= 0) context_switch(R.host, R.t[first].ctx, false);
}

static void thread_entry()
{
    context_entered();
    R.fn(R.ctx);
    cuda_thread &me = R.t[R.cur];
    me.state = ST_DONE;
    R.live--;
    leave(me, true);
    abort(); /* a finished thread is never resumed */
}

/* ------------------------------------------------------------ messages */

static const char *short_file(const char *f)
{
    const char *s = strstr(f, "kernels/");
    return s ? s : f;
}

static std::string where(const cuda_thread &t)
{
    char b[256];
    const char *what = t.state == ST_DONE ? "exited"
                       : t.state == ST_RUN ? "running"
                       : t.state == ST_BAR ? "__syncthreads"
                       : t.mode == SHFL_IDX ? "__shfl_sync"
                       : t.mode == SHFL_XOR ? "__shfl_xor_sync"
                       : t.mode == SHFL_UP ? "__shfl_up_sync"
                       : t.mode == SHFL_DOWN ? "__shfl_down_sync"
                       : t.mode == VOTE_BALLOT ? "__ballot_sync"
                       : t.mode == WARP_SYNC ? "__syncwarp"
                       : t.arg == 0 ? "wmma::load_matrix_sync"
                       : t.arg == 1 ? "wmma::store_matrix_sync"
                                    : "wmma::mma_sync";
    if (t.state == ST_DONE || t.state == ST_RUN) snprintf(b, sizeof b, "%s", what);
    else if (t.state == ST_WARP)
        snprintf(b, sizeof b, "%s(mask 0x%08x) at %s:%d", what, t.mask, short_file(t.file), t.line);
    else snprintf(b, sizeof b, "%s at %s:%d", what, short_file(t.file), t.line);
    return b;
}

/* the same call site: the same literal almost always, the same text otherwise */
static bool same_site(const cuda_thread &a, const cuda_thread &b)
{
    return a.line == b.line && (a.file == b.file || !strcmp(a.file, b.file));
}

/* ------------------------------------------------------------ warp collectives */

/* Releases every complete collective of warp w; returns how many lanes it released, or -1
 * after a failure. Lane sets are bit masks (bit k: lane k); widths are powers of 2, so a
 * segment and an index within it are masks too. */
static int resolve_warp(int w)
{
    int released = 0;
    const int base = w * 32, lanes = std::min(32, R.n - base);
    const unsigned exist = lanes == 32 ? ~0u : (1u << lanes) - 1u;
    cuda_thread *const L = &R.t[base];
    for (int l = 0; l < lanes; l++) {
        cuda_thread &t = L[l];
        if (t.state != ST_WARP) continue;
        const unsigned m = t.mask;
        if (!((m >> l) & 1u)) {
            fail_block("thread %u (lane %d) calls %s with its own bit clear in the mask", base + l, l,
                       where(t).c_str());
            return -1;
        }
        /* every live lane named in the mask must wait at the same collective with the same
         * mask; lanes that exited (or do not exist) are ignored, as CUDA allows, but may not
         * be read */
        bool ready = true;
        unsigned arrived = 0, ballot = 0;
        for (unsigned left = m & exist; left; left &= left - 1) {
            const int k = __builtin_ctz(left);
            const cuda_thread &o = L[k];
            if (o.state == ST_WARP) {
                if (o.mask != m || o.mode != t.mode || !same_site(o, t)) {
                    fail_block("warp %d diverged: lane %d waits at %s, lane %d at %s", w, l, where(t).c_str(), k,
                               where(o).c_str());
                    return -1;
                }
                arrived |= 1u << k;
                ballot |= (unsigned)(o.value != 0) << k;
            } else if (o.state == ST_BAR) {
                fail_block("deadlock in warp %d: lane %d waits at %s but lane %d named in its mask waits at %s", w,
                           l, where(t).c_str(), k, where(o).c_str());
                return -1;
            } else if (o.state == ST_RUN) {
                ready = false;
            }
        }
        if (!ready) continue;
        const int wd = t.width;
        if (wd < 1 || wd > 32 || (wd & (wd - 1))) {
            fail_block("%s with width %d (must be a power of 2 up to 32)", where(t).c_str(), wd);
            return -1;
        }
        const int wmask = wd - 1;
        for (unsigned left = arrived; left; left &= left - 1) {
            const int k = __builtin_ctz(left);
            cuda_thread &o = L[k];
            if (o.mode > SHFL_DOWN) {
                if (o.mode == VOTE_BALLOT) o.result = ballot;
                continue;
            }
            const int seg = k & ~wmask;
            int src = k;
            switch (o.mode) {
            case SHFL_IDX: src = seg + (o.arg & wmask); break; /* arg mod wd, negative args included */
            case SHFL_XOR: src = k ^ o.arg; if (src >= seg + wd) src = k; break;
            case SHFL_UP: src = k - o.arg; if (src < seg) src = k; break;
            case SHFL_DOWN: src = k + o.arg; if (src >= seg + wd) src = k; break;
            }
            if (src < 0 || src >= lanes || !((arrived >> src) & 1u)) {
                fail_block("thread %u %s reads lane %d, which %s: undefined value", base + k, where(o).c_str(), src,
                           src < 0 || src >= lanes ? "does not exist"
                           : !((m >> src) & 1u)     ? "is not in the mask"
                                                    : "has exited");
                return -1;
            }
            o.result = L[src].value;
        }
        counts.warp_collectives++;
        for (unsigned left = arrived; left; left &= left - 1) L[__builtin_ctz(left)].state = ST_RUN;
        released += __builtin_popcount(arrived);
    }
    return released;
}

static int resolve_warps()
{
    int released = 0;
    for (int w = 0; w < (R.n + 31) / 32; w++) {
        const int r = resolve_warp(w);
        if (r < 0) return -1;
        released += r;
    }
    return released;
}

/* ------------------------------------------------------------ block barriers */

/* Every live thread waits at a barrier (no collective could be released): releases it with
 * its reduction, or fails. */
static bool resolve_barrier()
{
    int first = -1, count = 0, live = 0;
    for (int i = 0; i < R.n; i++) {
        cuda_thread &t = R.t[i];
        if (t.state == ST_DONE) continue;
        live++;
        if (t.state != ST_BAR) {
            /* a warp collective that cannot complete, while others wait at a barrier */
            int other = -1;
            for (int j = 0; j < R.n; j++)
                if (R.t[j].state == ST_BAR) {
                    other = j;
                    break;
                }
            fail_block("deadlock: thread %d waits at %s%s%s", i, where(t).c_str(),
                       other >= 0 ? ", thread waiting at " : "", other >= 0 ? where(R.t[other]).c_str() : "");
            return false;
        }
        if (first < 0) first = i;
        const cuda_thread &f0 = R.t[first];
        if (t.kind != f0.kind || !same_site(t, f0)) {
            fail_block("barrier divergence: thread %d waits at %s, thread %d at %s", first, where(f0).c_str(), i,
                       where(t).c_str());
            return false;
        }
        count += (int)t.value;
    }
    if (live == 0) return true;
    const int kind = R.t[first].kind;
    const int exited = R.n - live;
    if (exited && cfg().strict_exit) {
        int ex = -1;
        for (int i = 0; i < R.n; i++)
            if (R.t[i].state == ST_DONE) {
                ex = i;
                break;
            }
        fail_block("barrier with exited threads: %d threads wait at %s but %d exited (thread %d) "
                   "(CUDACPU_STRICT_EXIT=0 counts exited threads as arrived, as the hardware does)",
                   live, where(R.t[first]).c_str(), exited, ex);
        return false;
    }
    counts.barriers++;
    const int red = kind == BAR_OR ? count > 0 : kind == BAR_AND ? count == live : kind == BAR_COUNT ? count : 0;
    for (int i = 0; i < R.n; i++) {
        cuda_thread &t = R.t[i];
        if (t.state == ST_BAR) {
            t.result = (uint64_t)red;
            t.state = ST_RUN;
        }
    }
    return true;
}

/* ------------------------------------------------------------ a block */

static void prepare(int nthreads, void (*fn)(void *), void *ctx)
{
    if ((int)R.t.size() < nthreads) R.t.resize(nthreads);
    if ((int)R.lanes.size() < nthreads) {
        R.lanes.resize(nthreads);
        for (int i = 0; i < nthreads; i++) R.lanes[i] = i;
    }
    R.n = R.live = nthreads;
    R.fn = fn;
    R.ctx = ctx;
    R.failed = false;
    R.why.clear();
    const unsigned bx = blockDim.x, bxy = blockDim.x * blockDim.y;
    for (int i = 0; i < nthreads; i++) {
        cuda_thread &t = R.t[i];
        stack_alloc(t.ctx);
        context_start(t.ctx, &thread_entry, (unsigned)i);
        t.state = ST_RUN;
        t.tid = uint3{(unsigned)i % bx, ((unsigned)i / bx) % blockDim.y, (unsigned)i / bxy};
    }
}

bool run_block(int nthreads, unsigned long long seed, void (*fn)(void *), void *ctx, std::string *why)
{
    prepare(nthreads, fn, ctx);
    const schedule_order mode = cfg().order;
    if (mode == ORDER_WARPFWD || mode == ORDER_WARPREV) {
        const int nw = (nthreads + 31) / 32;
        for (;;) {
            for (int k = 0; k < nw; k++) {
                const int w = mode == ORDER_WARPFWD ? k : nw - 1 - k;
                const int lanes = std::min(32, nthreads - w * 32);
                for (;;) {
                    run_round(&R.lanes[w * 32], lanes);
                    if (R.failed) goto failed;
                    const int r = resolve_warp(w);
                    if (r < 0) goto failed;
                    if (r == 0) break;
                }
            }
            if (R.live == 0) return true;
            if (!resolve_barrier()) goto failed;
        }
    }
    {
        std::vector<int> &order = R.order;
        order.resize(nthreads);
        for (int i = 0; i < nthreads; i++) order[i] = mode == ORDER_REV ? nthreads - 1 - i : i;
        uint64_t rs = seed * 0x9E3779B97F4A7C15ull + 1;
        for (;;) {
            if (mode == ORDER_RAND) /* a fresh permutation every round */
                for (int i = nthreads - 1; i > 0; i--) {
                    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
                    std::swap(order[i], order[(int)(rs % (uint64_t)(i + 1))]);
                }
            run_round(order.data(), nthreads);
            if (R.failed) goto failed;
            const int r = resolve_warps();
            if (r < 0) goto failed;
            if (r > 0) continue;
            if (R.live == 0) return true;
            if (!resolve_barrier()) goto failed;
        }
    }
failed:
    *why = R.why;
    return false;
}

/* ------------------------------------------------------------ what a thread calls */

/* Parks the calling thread at a sync point (state ST_BAR or ST_WARP, the point's fields already
 * set in t) at file:line until the scheduler resolves it; returns the point's result. */
static uint64_t wait_at(cuda_thread &t, int state, const char *file, int line)
{
    t.state = state;
    t.file = file;
    t.line = line;
    leave(t, false);
    return t.result;
}

int block_barrier(int kind, int pred, const char *file, int line)
{
    cuda_thread &t = R.t[R.cur];
    t.kind = kind;
    t.value = (uint64_t)pred;
    return (int)wait_at(t, ST_BAR, file, line);
}

void fail_thread(const char *msg, const char *file, int line)
{
    fail_block("thread %d: %s at %s:%d", R.cur, msg, short_file(file), line);
}

uint64_t warp_collective(int mode, unsigned mask, uint64_t value, int arg, int width, const char *file, int line)
{
    cuda_thread &t = R.t[R.cur];
    t.mode = mode;
    t.mask = mask;
    t.value = value;
    t.arg = arg;
    t.width = width;
    return wait_at(t, ST_WARP, file, line);
}

} // namespace cudacpu
