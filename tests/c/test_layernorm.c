/* test_layernorm.c — the layernorm kernel's forward against a direct f64 formula, and each
 * f32 row's bits whatever rows are beside it (the kernel interleaves rows in groups).
 * Gradients (=, +=, NULL skipped), f32 and half dtypes, guards: tests/c/test_ops_table.c. */
#include <string.h>

#include "check.h"
#include "op_check.h"
#include "cpu/layernorm.h"

static void test_layernorm_forward_formula(void)
{
    int64_t N = 3, C = 7;
    double x[21], w[7], b[7], out[21], mean[3], rstd[3];
    oc_seed(10);
    oc_fill(x, N * C, 3);
    oc_fill(w, C, 1);
    oc_fill(b, C, 1);
    for (int64_t i = 0; i < N * C; i++) x[i] += 100;    /* a large mean must not hurt */
    tr_k_layernorm_fwd_f64(out, mean, rstd, x, w, b, N, C, 1e-5);
    for (int64_t n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += x[n * C + c] / C;
        for (int64_t c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m) / C;
        CHECK_CLOSE(mean[n], m, 1e-12, 1e-12);
        CHECK_CLOSE(rstd[n], 1 / sqrt(v + 1e-5), 1e-12, 1e-10);
        for (int64_t c = 0; c < C; c++)
            CHECK_CLOSE(out[n * C + c], (x[n * C + c] - m) / sqrt(v + 1e-5) * w[c] + b[c], 1e-10, 1e-10);
    }
}

/* 19 rows (two groups of rows and a partial one; more than 16384 elements, so threaded) against
 * each row alone: the same bits for out, mean, rstd and dx. The groups' sums run across their
 * rows (AVX2 where the CPU has it), a lone row's in a scalar loop: C 1000 is whole blocks of 8
 * columns, C 901 ends in a tail of 5. */
static void test_rows_alone_same_bits(void)
{
    enum { N = 19, CMAX = 1000 };
    static float x[N * CMAX], g[N * CMAX], out[N * CMAX], dx[N * CMAX], o1[CMAX], d1[CMAX];
    float w[CMAX], b[CMAX], mean[N], rstd[N], m1, r1;
    const int64_t widths[2] = { 1000, 901 };
    for (int t = 0; t < 2; t++) {
        const int64_t C = widths[t];
        oc_seed(11);
        for (int64_t i = 0; i < N * C; i++) {
            x[i] = (float)(oc_rand() * 2 + (double)(i % 7));
            g[i] = (float)oc_rand();
        }
        for (int64_t c = 0; c < C; c++) {
            w[c] = (float)(oc_rand() * 0.5 + 1);
            b[c] = (float)(oc_rand() * 0.5);
        }
        tr_k_layernorm_fwd_f32(out, mean, rstd, x, w, b, N, C, 1e-5f);
        tr_k_layernorm_bwd_f32(dx, NULL, NULL, g, x, w, mean, rstd, N, C);
        for (int64_t n = 0; n < N; n++) {
            tr_k_layernorm_fwd_f32(o1, &m1, &r1, x + n * C, w, b, 1, C, 1e-5f);
            tr_k_layernorm_bwd_f32(d1, NULL, NULL, g + n * C, x + n * C, w, &m1, &r1, 1, C);
            CHECK(memcmp(&m1, mean + n, sizeof m1) == 0 && memcmp(&r1, rstd + n, sizeof r1) == 0,
                  "C %lld row %lld: mean/rstd differ from the row alone", (long long)C, (long long)n);
            CHECK(memcmp(o1, out + n * C, sizeof(float) * (size_t)C) == 0, "C %lld row %lld: out differs from the row alone",
                  (long long)C, (long long)n);
            CHECK(memcmp(d1, dx + n * C, sizeof(float) * (size_t)C) == 0, "C %lld row %lld: dx differs from the row alone",
                  (long long)C, (long long)n);
        }
    }
}

/* Blocks of rows for the half paths: whole row groups where one fits. */
static void test_block_rows(void)
{
    CHECK(tr_k_layernorm_block_rows(8192, 384) == 16, "8192 / 384 = 21 rows should round down to 16");
    CHECK(tr_k_layernorm_block_rows(8192, 1024) == 8, "8 rows of 1024 fit 8192");
    CHECK(tr_k_layernorm_block_rows(8192, 2000) == 4, "4 rows of 2000: under one group, kept");
    CHECK(tr_k_layernorm_block_rows(8192, 9000) == 1, "a row longer than the block: 1");
}

int main(void)
{
    RUN(test_layernorm_forward_formula);
    RUN(test_rows_alone_same_bits);
    RUN(test_block_rows);
    return check_done();
}
