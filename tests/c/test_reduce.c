/* test_reduce.c — reduction kernels: pairwise sums of 1e6 elements in f32 against f64,
 * last-dim sums, sum of squares, scale-and-check-finite with inf and NaN. */
#include "check.h"
#include "op_check.h"

#include "cpu/reduce.h"

static void test_sums(void)
{
    oc_seed(13);
    int64_t n = 1000003;
    double *x = malloc(n * 8);
    float *xf = malloc(n * 4);
    oc_fill(x, n, 1);
    for (int64_t i = 0; i < n; i++) x[i] += 0.25;   /* a mean away from 0: naive f32 summation drifts */
    oc_to_f32(xf, x, n);
    double ref = 0, refsq = 0;
    for (int64_t i = 0; i < n; i++) ref += (double)xf[i], refsq += (double)xf[i] * xf[i];
    CHECK_CLOSE(tr_k_sum_all_fwd_f32(xf, n), ref, 0, 1e-6);
    CHECK_CLOSE(tr_k_sumsq_all_fwd_f32(xf, n), refsq, 0, 1e-6);
    CHECK_CLOSE(tr_k_sum_all_fwd_f64(x, n), 0.25 * n, 2000, 0);   /* sanity: mean 0.25 */
    int64_t N = 7, C = 3001;
    float *o = oc_guarded(N * 4);
    double *od = malloc(N * 8);
    tr_k_sum_lastdim_fwd_f32(o, xf, N, C);
    tr_k_sum_lastdim_fwd_f64(od, x, N, C);
    close_f32("sum_lastdim", o, od, N, 1e-5, 1e-5);
    tr_k_sum_lastdim_fwd_f64(od, x, 1, 1);
    CHECK(od[0] == x[0], "sum of one element");
    CHECK(oc_guard_ok(o), "sum_lastdim wrote outside its output");
    free(x), free(xf), oc_guarded_free(o), free(od);
}

static void test_scale_check_finite(void)
{
    float x[5] = { 1, -2, 3, 4, 5 };
    CHECK(tr_k_scale_check_finite_fwd_f32(x, 5, 0.5f) == 0, "finite values reported as non-finite");
    CHECK(x[1] == -1 && x[4] == 2.5f, "not scaled: %g %g", x[1], x[4]);
    x[3] = INFINITY;
    CHECK(tr_k_scale_check_finite_fwd_f32(x, 5, 0.5f) == 1, "inf not found");
    x[3] = NAN;
    CHECK(tr_k_scale_check_finite_fwd_f32(x, 5, 1.0f) == 1, "NaN not found");
    double y[2] = { 1e308, 1 };
    CHECK(tr_k_scale_check_finite_fwd_f64(y, 2, 10.0) == 1, "overflow to inf by the scale not found");
    CHECK(tr_k_scale_check_finite_fwd_f64(y + 1, 1, 10.0) == 0 && y[1] == 100, "f64 scale: %g", y[1]);
}

int main(void)
{
    RUN(test_sums);
    RUN(test_scale_check_finite);
    return check_done();
}
