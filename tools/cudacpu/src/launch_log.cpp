/* launch_log.cpp (cudacpu) — the launch log of cuda_runtime.h (cudacpu_launch_log): one record
 * per submitted launch, in submission order, and the WMMA products of each, added when it ran.
 * A launch runs after its submission (at once in sync mode, later in deferred mode), so a
 * record is found again by its closure, unique while the launch is queued.
 * Invariant: every function runs under api_mutex (the API calls that reach it hold it). */
#include "internal.h"

#include <unordered_map>
#include <vector>

namespace cudacpu {

static bool logging;
static std::vector<cudacpu_launch> records;
static std::unordered_map<const void *, size_t> pending; /* closure -> its record */

void log_launch(const char *name, const launch_config &c, const void *ctx)
{
    if (!logging) return;
    cudacpu_launch r{name, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, 0};
    records.push_back(r);
    if (ctx) pending[ctx] = records.size() - 1;
}

void log_ran(const void *ctx, unsigned long long n)
{
    const auto it = pending.find(ctx);
    if (it == pending.end()) return;
    records[it->second].mma_syncs += n;
    pending.erase(it);
}

} // namespace cudacpu

extern "C" {

void cudacpu_launch_log(int on)
{
    using namespace cudacpu;
    api_lock lk(api_mutex);
    if (on) {
        records.clear();
        pending.clear();
    }
    logging = on != 0;
}

int cudacpu_launch_log_count(void)
{
    cudacpu::api_lock lk(cudacpu::api_mutex);
    return (int)cudacpu::records.size();
}

int cudacpu_launch_log_get(int i, struct cudacpu_launch *out)
{
    using namespace cudacpu;
    api_lock lk(api_mutex);
    if (i < 0 || (size_t)i >= records.size()) return 0;
    *out = records[(size_t)i];
    return 1;
}

} // extern "C"
