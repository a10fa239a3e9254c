/* test_layernorm.c — the layernorm kernel's forward against a direct f64 formula.
 * Gradients (=, +=, NULL skipped), f32 and half dtypes, guards: tests/c/test_ops_table.c. */
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

int main(void)
{
    RUN(test_layernorm_forward_formula);
    return check_done();
}
