/* bench_alloc.c — nanoseconds per alloc/free pair of the caching allocator (CPU
 * backend, warm cache) against malloc/free, for a few size mixes and numbers of blocks
 * kept live. Neither side touches the memory, so this measures bookkeeping only.
 * Prints a table; asserts nothing but that every allocation succeeded. */
#include "trainer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mix {
    const char *name;
    size_t lo, hi;  /* sizes log-uniform-ish in [lo, hi] */
    int window;     /* blocks kept live; each step frees the oldest and allocates one */
    long steps;
} mix;

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static size_t pick(uint64_t *rng, size_t lo, size_t hi)
{
    int bits_lo = 0, bits_hi = 0;
    while (((size_t)1 << bits_lo) < lo) bits_lo++;
    while (((size_t)1 << bits_hi) < hi) bits_hi++;
    int k = bits_lo + (int)(xorshift(rng) % (uint64_t)(bits_hi - bits_lo + 1));
    size_t s = ((size_t)1 << k) + xorshift(rng) % ((size_t)1 << k);
    return s < lo ? lo : s > hi ? hi : s;
}

static double now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per pair; sizes[] is the precomputed request sequence. */
static double run_caching(tr_alloc *a, const mix *m, const size_t *sizes)
{
    void **live = calloc((size_t)m->window, sizeof *live);
    tr_error e;
    if (!live) exit(1);
    double t0 = 0;
    for (long i = -m->window; i < m->steps; i++) { /* the first window only warms up */
        if (i == 0) t0 = now_ns();
        long idx = i + m->window;
        int slot = (int)(idx % m->window);
        tr_alloc_free(a, live[slot]);
        if (tr_alloc_malloc(a, sizes[idx], TR_TAG_ACTIVATIONS, 0, &live[slot], &e) != TR_OK) {
            fprintf(stderr, "bench_alloc: %s\n", e.msg);
            exit(1);
        }
    }
    double t = now_ns() - t0;
    for (int s = 0; s < m->window; s++) tr_alloc_free(a, live[s]);
    free(live);
    return t / (double)m->steps;
}

static double run_malloc(const mix *m, const size_t *sizes)
{
    void **live = calloc((size_t)m->window, sizeof *live);
    if (!live) exit(1);
    double t0 = 0;
    for (long i = -m->window; i < m->steps; i++) {
        if (i == 0) t0 = now_ns();
        long idx = i + m->window;
        int slot = (int)(idx % m->window);
        free(live[slot]);
        live[slot] = malloc(sizes[idx]);
        if (!live[slot]) {
            fprintf(stderr, "bench_alloc: malloc(%zu) failed\n", sizes[idx]);
            exit(1);
        }
    }
    double t = now_ns() - t0;
    for (int s = 0; s < m->window; s++) free(live[s]);
    free(live);
    return t / (double)m->steps;
}

int main(void)
{
    const mix mixes[] = {
        { "4 KiB, 1 live", 4096, 4096, 1, 2000000 },
        { "64 B-64 KiB, 256 live", 64, 65536, 256, 2000000 },
        { "1 KiB-8 MiB, 64 live", 1024, 8 << 20, 64, 500000 },
        { "16-64 MiB, 8 live", 16 << 20, 64 << 20, 8, 20000 },
    };
    tr_raw_backend cpu = tr_cpu_raw_backend();
    printf("%-24s %14s %14s %8s %12s\n", "mix", "caching ns", "malloc ns", "ratio", "reserved MiB");
    for (size_t k = 0; k < sizeof mixes / sizeof mixes[0]; k++) {
        const mix *m = &mixes[k];
        size_t n = (size_t)(m->steps + m->window);
        size_t *sizes = malloc(n * sizeof *sizes);
        tr_alloc *a = tr_alloc_new(&cpu);
        if (!sizes || !a) return 1;
        uint64_t rng = 0x1234567 + k;
        for (size_t i = 0; i < n; i++) sizes[i] = pick(&rng, m->lo, m->hi);
        double c = run_caching(a, m, sizes);
        double ml = run_malloc(m, sizes);
        tr_alloc_stats st;
        tr_alloc_get_stats(a, &st);
        printf("%-24s %14.1f %14.1f %8.2f %12.1f\n", m->name, c, ml, c / ml, (double)st.peak_reserved / (1 << 20));
        tr_alloc_destroy(a);
        free(sizes);
    }
    return 0;
}
