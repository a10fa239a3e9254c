/* scheduler.h (cudacpu) — runs one block: every CUDA thread a fiber, released from barriers
 * and warp collectives only when the CUDA rules say it may be (see cudacpu_device.h), in the
 * configured order between sync points.
 *
 * Invariant: one block runs at a time (the caller holds api_mutex); a block's fibers run on
 * the calling OS thread and never preempt each other. */
#ifndef CUDACPU_SCHEDULER_H
#define CUDACPU_SCHEDULER_H

#include <string>

namespace cudacpu {

/* Runs nthreads threads (blockDim and blockIdx already set), each calling fn(ctx); seed
 * picks the rand order's permutations. Returns false when the block broke a rule, with the
 * rule, the thread and the source lines in *why. */
bool run_block(int nthreads, unsigned long long seed, void (*fn)(void *), void *ctx, std::string *why);

/* Context switches made so far (CUDACPU_STATS). */
unsigned long long fiber_switches();

} // namespace cudacpu

#endif
