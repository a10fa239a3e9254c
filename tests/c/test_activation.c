/* test_activation.c — GELU (erf and tanh forms) and softmax kernels: forward against
 * direct formulas / known values, and a fully -inf softmax row giving zeros instead of
 * NaN. Gradients, f32 and half dtypes: tests/c/test_ops_table.c. */
#include "check.h"
#include "op_check.h"
#include "cpu/gelu.h"
#include "cpu/softmax.h"

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
    RUN(test_softmax_rows_sum_to_one_without_overflow);
    return check_done();
}
