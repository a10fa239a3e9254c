/* bench_convert.c — throughput of the hot host conversions (f32 <-> bf16/f16) and of
 * the Philox streams, in elements per second; prints a table, asserts nothing. */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "bench_clock.h"

int main(void)
{
    size_t n = (size_t)1 << 24;
    float *f = malloc(n * sizeof *f), *g = malloc(n * sizeof *g);
    uint16_t *h = malloc(n * sizeof *h);
    uint8_t *keep = malloc(n);
    if (!f || !g || !h || !keep) { fprintf(stderr, "bench_convert: out of memory\n"); return 1; }
    tr_rng_key key = { 42, 1, 2, 3 };
    tr_rng_normal(f, n, key, 0);

    printf("%-22s %12s\n", "operation (16M elems)", "Gelem/s");
    struct { const char *name; int which; } rows[] = {
        { "f32 -> bf16", 0 }, { "bf16 -> f32", 1 }, { "f32 -> f16", 2 }, { "f16 -> f32", 3 },
        { "rng uniform", 4 }, { "rng normal", 5 }, { "dropout mask", 6 },
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = bench_now();
            switch (rows[r].which) {
            case 0: tr_convert(h, TR_BF16, f, TR_F32, n); break;
            case 1: tr_convert(g, TR_F32, h, TR_BF16, n); break;
            case 2: tr_convert(h, TR_F16, f, TR_F32, n); break;
            case 3: tr_convert(g, TR_F32, h, TR_F16, n); break;
            case 4: tr_rng_uniform(g, n, key, 0); break;
            case 5: tr_rng_normal(g, n, key, 0); break;
            case 6: tr_dropout_mask_bits(keep, n, 0.1f, key, 0); break;
            }
            double dt = bench_now() - t0;
            if (dt < best) best = dt;
        }
        printf("%-22s %12.2f\n", rows[r].name, n / best * 1e-9);
    }
    free(f);
    free(g);
    free(h);
    free(keep);
    return 0;
}
