/* bench_rng.c — the dropout streams per call, as the step draws them: the attention
 * probabilities' keep decisions for one 64-row query block of T = 128 keys (8192 elements
 * a call) and per row (128 a call, how the kernel drew float uniforms before), from inside
 * a parallel region on every thread as the attention kernel calls them, on each instruction
 * set the CPU has. Prints CPU ns per element (process CPU time, all threads: steadier than
 * wall time on a loaded machine); asserts nothing (never a test). */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "bench_clock.h"

static double now(void) { return bench_seconds(CLOCK_PROCESS_CPUTIME_ID); }

enum { BLOCK = 64 * 128, TOTAL = 32 * 12 * 128 * 128 };   /* one layer's attention probabilities */

typedef enum { ROW_UNIFORM, BLOCK_BYTES, BLOCK_WORDS } pattern;

/* Draws one layer's worth of elements in calls of `len`, split over the threads; seconds. */
static double run(pattern pat, tr_rng_isa isa, size_t len)
{
    const tr_rng_key key = { 42, 1, 2, 3 };
    double t0 = now();
#pragma omp parallel
    {
        float *u = malloc(BLOCK * sizeof *u);
        uint8_t *b = malloc(BLOCK);
        uint32_t *w = malloc(BLOCK * sizeof *w);
#pragma omp for schedule(static)
        for (int64_t c = 0; c < (int64_t)(TOTAL / len); c++) {
            uint64_t off = (uint64_t)c * len;
            if (pat == ROW_UNIFORM) tr_rng_uniform(u, len, key, off);
            else if (pat == BLOCK_BYTES) tr_dropout_mask_bits_isa(isa, b, len, 0.1f, key, off);
            else tr_dropout_mask_words_isa(isa, w, len, 0.1f, key, off);
        }
        free(u);
        free(b);
        free(w);
    }
    return now() - t0;
}

int main(void)
{
    static const char *isa_name[] = { "portable", "AVX2", "AVX-512" };
    printf("%-34s %10s\n", "stream (6.3M elements, all threads)", "CPU ns/elem");
    struct { const char *name; pattern pat; size_t len; } rows[] = {
        { "uniform floats, a call per row", ROW_UNIFORM, 128 },
        { "keep bytes, a call per block", BLOCK_BYTES, BLOCK },
        { "keep masks, a call per block", BLOCK_WORDS, BLOCK },
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (int isa = 0; isa <= (int)tr_rng_cpu_isa(); isa++) {
            if (rows[r].pat == ROW_UNIFORM && isa != (int)tr_rng_cpu_isa()) continue;   /* its own path */
            double best = 1e30;
            for (int rep = 0; rep < 5; rep++) {
                double dt = run(rows[r].pat, (tr_rng_isa)isa, rows[r].len);
                if (dt < best) best = dt;
            }
            char label[64];
            snprintf(label, sizeof label, "%s (%s)", rows[r].name, rows[r].pat == ROW_UNIFORM ? "AVX2 words" : isa_name[isa]);
            printf("%-44s %8.3f\n", label, best / TOTAL * 1e9);
        }
    return 0;
}
