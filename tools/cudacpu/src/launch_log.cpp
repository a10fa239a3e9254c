/* launch_log.cpp (cudacpu) — the launch log of cuda_runtime.h (cudacpu_launch_log): one record
 * per submitted launch, in submission order, and the WMMA products of each, added when it ran.
 * A launch runs after its submission (at once in sync mode, later in deferred mode), so a
 * record is found again by its closure, unique while the launch is queued. Also the file of
 * CUDACPU_LAUNCH_LOG: each kernel's largest block, written at exit.
 * Invariant: every function runs under api_mutex (the API calls that reach it hold it). */
#include "internal.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace cudacpu {

static bool logging;
static std::vector<cudacpu_launch> records;
static std::unordered_map<const void *, size_t> pending; /* closure -> its record */

/* ------------------------------------------------------------ CUDACPU_LAUNCH_LOG */

/* The largest block (threads) each kernel was launched with since start, by its name as
 * written at the launch, appended to the file at exit as "THREADS NAME" lines, whether or not
 * the in-process log records: tests/cudacpu/launch_blocks.sh compares them with the bounds
 * that tests/cli/test_ptxas_resources.sh checks each kernel's registers against. */
static std::map<std::string, unsigned> largest_block;

static void write_largest_blocks()
{
    std::string lines; /* written in one call: several programs may append to one file */
    for (const auto &kv : largest_block) lines += std::to_string(kv.second) + " " + kv.first + "\n";
    FILE *f = fopen(cfg().launch_log, "a");
    if (!f || fputs(lines.c_str(), f) == EOF || fclose(f) != 0)
        fprintf(stderr, "cudacpu: CUDACPU_LAUNCH_LOG=%s: %s\n", cfg().launch_log, strerror(errno));
}

static void note_largest_block(const char *name, const launch_config &c)
{
    static bool registered = false;
    if (!registered) {
        registered = true;
        if (atexit(write_largest_blocks)) fprintf(stderr, "cudacpu: atexit failed: no CUDACPU_LAUNCH_LOG\n");
    }
    unsigned &most = largest_block[name];
    most = std::max(most, c.block.x * c.block.y * c.block.z);
}

/* ------------------------------------------------------------ the in-process log */

void log_launch(const char *name, const launch_config &c, const void *ctx)
{
    if (cfg().launch_log && strcmp(name, "cudaLaunchHostFunc") != 0) note_largest_block(name, c);
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
