/* test_activation.c — GELU (erf and tanh forms) and softmax kernels: forward against
 * direct formulas / known values, and a fully -inf softmax row giving zeros instead of
 * NaN; the float kernels' vectorised 1 + erf against libm's, and float GELU forward and
 * backward against the double reference over a long, odd-sized array (every thread's spans,
 * the vector clones and the tail). Gradients, half dtypes: tests/c/test_ops_table.c. */
#include "check.h"
#include "op_check.h"
#include "cpu/activation.h"
#include "cpu/softmax.h"
#include "cpu/fast_math.h"

#include <stdlib.h>

/* ------------------------------------------------------------ gelu */

static void test_gelu_known_values(void)
{
    double x[3] = { 1.0, -0.5, 2.0 }, y[3];
    tr_k_gelu_fwd_f64(y, x, 3, TR_GELU_ERF);
    /* the formulas in Python float64 (math.erf, math.tanh); erf values equal torch.nn.functional.gelu */
    CHECK_CLOSE(y[0], 0.8413447460685429, 1e-15, 1e-14);
    CHECK_CLOSE(y[1], -0.15426876936299344, 1e-15, 1e-14);
    CHECK_CLOSE(y[2], 1.9544997361036416, 1e-15, 1e-14);
    tr_k_gelu_fwd_f64(y, x, 3, TR_GELU_TANH);
    /* approximate="tanh" form */
    CHECK_CLOSE(y[0], 0.8411919906082768, 1e-15, 1e-14);
    CHECK_CLOSE(y[1], -0.15428599017485606, 1e-15, 1e-14);
    CHECK_CLOSE(y[2], 1.954597694087775, 1e-15, 1e-14);
}

static void test_fast_one_plus_erf_matches_libm(void)
{
    /* relative to 1 + erf itself, so the left tail (GELU of negative inputs) counts too; below
     * -4 the float rounding of x^2 in e^{-x^2} (6e-8 x^2) bounds what float can give */
    double worst = 0, worst_tail = 0;
    for (int i = -900000; i <= 600000; i++) {
        float x = (float)i * 1e-5f;
        double ref = erfc(-(double)x);   /* = 1 + erf(x), without cancellation */
        double rel = fabs((double)tr_fast_one_plus_erff(x) - ref) / ref;
        if (x >= -4) worst = fmax(worst, rel);
        else worst_tail = fmax(worst_tail, rel);
    }
    CHECK(worst < 1e-6, "fast 1 + erf: max relative error %.3g over [-4, 6]", worst);   /* 7.5e-7 measured */
    CHECK(worst_tail < 6e-6, "fast 1 + erf: max relative error %.3g over [-9, -4]", worst_tail);   /* 4.1e-6 measured */
    CHECK(tr_fast_one_plus_erff(INFINITY) == 2.0f && tr_fast_one_plus_erff(-INFINITY) == 0.0f, "1 + erf(+-inf)");
    CHECK(isnan(tr_fast_one_plus_erff(NAN)), "NaN stays NaN");
}

static void test_gelu_f32_matches_f64(void)
{
    enum { N = 200003 };   /* above the kernels' threading threshold, not a multiple of a span */
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *dy = malloc(sizeof(float) * N),
          *dx = malloc(sizeof(float) * N);
    double *xd = malloc(sizeof(double) * N), *yd = malloc(sizeof(double) * N), *dyd = malloc(sizeof(double) * N),
           *dxd = malloc(sizeof(double) * N);
    CHECK(x && y && dy && dx && xd && yd && dyd && dxd, "buffers");
    for (int i = 0; i < N; i++) {
        x[i] = (float)(((i * 7919) % 20001) - 10000) * 8e-4f;   /* [-8, 8] */
        dy[i] = (float)((i % 13) - 6) * 0.25f;
        xd[i] = x[i];
        dyd[i] = dy[i];
    }
    tr_k_gelu_fwd_f32(y, x, N, TR_GELU_ERF);
    tr_k_gelu_fwd_f64(yd, xd, N, TR_GELU_ERF);
    tr_k_gelu_bwd_f32(dx, dy, x, N, TR_GELU_ERF);
    tr_k_gelu_bwd_f64(dxd, dyd, xd, N, TR_GELU_ERF);
    double wf = 0, wb = 0;
    for (int i = 0; i < N; i++) {
        wf = fmax(wf, fabs(y[i] - yd[i]) / (1e-6 + fabs(yd[i])) * (fabs(yd[i]) > 1e-3));
        wf = fmax(wf, fabs(y[i] - yd[i]) * 1e3 * (fabs(yd[i]) <= 1e-3));
        wb = fmax(wb, fabs(dx[i] - dxd[i]) / (1 + fabs(dxd[i])));
    }
    CHECK(wf < 2e-6, "gelu f32 forward: worst error %.3g", wf);
    CHECK(wb < 2e-6, "gelu f32 backward: worst error %.3g", wb);
    free(x); free(y); free(dy); free(dx); free(xd); free(yd); free(dyd); free(dxd);
}

/* ------------------------------------------------------------ softmax */

static void test_softmax_rows_sum_to_one_without_overflow(void)
{
    double x[6] = { 1000, 1001, 1002, -5, 0, 5 }, y[6];
    tr_k_softmax_fwd_f64(y, x, 2, 3);
    CHECK_CLOSE(y[0] + y[1] + y[2], 1, 1e-15, 0);
    CHECK_CLOSE(y[2], 1 / (1 + exp(-1.0) + exp(-2.0)), 1e-15, 1e-14);
    CHECK_CLOSE(y[5], 1 / (1 + exp(-5.0) + exp(-10.0)), 1e-15, 1e-14);
    double m[3] = { -INFINITY, -INFINITY, -INFINITY };
    tr_k_softmax_fwd_f64(m, m, 1, 3);
    CHECK(m[0] == 0 && m[1] == 0 && m[2] == 0, "all -inf row: %g %g %g", m[0], m[1], m[2]);
}

int main(void)
{
    RUN(test_gelu_known_values);
    RUN(test_fast_one_plus_erf_matches_libm);
    RUN(test_gelu_f32_matches_f64);
    RUN(test_softmax_rows_sum_to_one_without_overflow);
    return check_done();
}
