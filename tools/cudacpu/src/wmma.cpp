/* wmma.cpp (cudacpu) — what mma.h's WMMA calls share: the seeded element mapping of each
 * fragment kind, the per-lane collective counts and the per-warp exchange buffers.
 *
 * The mapping of kind k is a permutation drawn from CUDACPU_SEED and k (xorshift, Fisher-Yates):
 * fixed for a process, as the hardware's is, and unrelated to any layout a kernel could guess.
 * Invariant: one block runs at a time, so the per-thread and per-warp statics belong to it;
 * a lane's count restarts when it first calls in a new block (g_block_serial). */
#include "mma.h"

#include "internal.h"
#include "scheduler.h"

#include <cstring>
#include <mutex>
#include <utility>

namespace cudacpu {

static wmma_map maps[WMMA_KINDS];
static std::once_flag maps_once;

static void make_maps()
{
    for (int k = 0; k < WMMA_KINDS; k++) {
        wmma_map &m = maps[k];
        const int slots = k == WMMA_ACC_KIND ? 256 : 512;
        for (int s = 0; s < slots; s++) m.elem[s] = (uint16_t)(s % 256);
        uint64_t r = (cfg().seed + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(k + 1) * 0xD1B54A32D192ED03ull;
        for (int s = slots - 1; s > 0; s--) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            std::swap(m.elem[s], m.elem[(int)(r % (uint64_t)(s + 1))]);
        }
        for (int e = 0; e < 256; e++) m.first[e] = 0xFFFF;
        for (int s = 0; s < slots; s++)
            if (m.first[m.elem[s]] == 0xFFFF) m.first[m.elem[s]] = (uint16_t)s;
    }
}

const wmma_map &wmma_map_of(int kind)
{
    std::call_once(maps_once, make_maps);
    return maps[kind];
}

static unsigned linear_tid()
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

struct lane_count {
    unsigned long long block;
    unsigned n;
};
static lane_count lane_counts[1024];
static wmma_exchange buffers[32][2];

static lane_count &count_of_lane()
{
    lane_count &c = lane_counts[linear_tid()];
    if (c.block != g_block_serial) {
        c.block = g_block_serial;
        c.n = 0;
    }
    return c;
}

int wmma_parity() { return (int)(count_of_lane().n & 1u); }

wmma_exchange &wmma_buffer(int parity) { return buffers[linear_tid() / 32][parity]; }

void wmma_fail(const char *msg, const char *file, int line) { fail_thread(msg, file, line); }

static unsigned long long products;

unsigned long long wmma_products() { return products; }

void wmma_collective(int op, const char *file, int line)
{
    if (op == WMMA_MMA && linear_tid() % 32 == 0) products++;
    if ((blockDim.x * blockDim.y * blockDim.z) % 32 != 0)
        wmma_fail("a WMMA call in a block that is not whole warps (every lane of a full warp must take part)", file,
                  line);
    count_of_lane().n++;
    (void)warp_collective(WMMA_SYNC, 0xffffffffu, 0, op, 32, file, line);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

void wmma_check_copies(const wmma_exchange &w, int ka, int kb, const char *file, int line)
{
    const wmma_map &ma = wmma_map_of(ka), &mb = wmma_map_of(kb);
    for (int s = 0; s < 512; s++) {
        const int fa = ma.first[ma.elem[s]], fb = mb.first[mb.elem[s]];
        const bool bad_a = !same_bits(w.a[s], w.a[fa]);
        if (bad_a || !same_bits(w.b[s], w.b[fb])) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "wmma::mma_sync: the two copies of an element of %s differ (lanes %d and %d): the kernel wrote "
                     "fragment elements non-uniformly, as if it knew the mapping",
                     bad_a ? "matrix_a" : "matrix_b", (bad_a ? fa : fb) / 16, s / 16);
            wmma_fail(msg, file, line);
            return;
        }
    }
}

} // namespace cudacpu
