/* test_activation.c — GELU (erf and tanh forms) and softmax kernels: forward against
 * direct formulas / known values, backward against central finite differences in f64,
 * f32 against f64, guards, and a fully -inf softmax row giving zeros instead of NaN. */
#include "check.h"
#include "nn_testutil.h"
#include "cpu/gelu.h"
#include "cpu/softmax.h"

/* ------------------------------------------------------------ gelu */

typedef struct {
    double *x, *R, *out;
    int64_t n;
    int approx;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    tr_k_gelu_fwd_f64(c->out, c->x, c->n, c->approx);
    return tu_dot(c->out, c->R, c->n);
}

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

static void test_gelu_backward_finite_differences(void)
{
    for (int approx = 0; approx < 2; approx++) {
        int64_t n = 37;
        gelu_ctx c = { malloc(8 * n), malloc(8 * n), malloc(8 * n), n, approx };
        double *dx = tu_guarded(8 * n), *fd = malloc(8 * n);
        tu_seed(20 + approx);
        tu_fill(c.x, n, 4);
        tu_fill(c.R, n, 1);
        tr_k_gelu_bwd_f64(dx, c.R, c.x, n, approx);
        tu_fd_grad(fd, c.x, n, gelu_loss, &c);
        CHECK(tu_rel_err(dx, fd, n) < 1e-6, "approx %d: rel err %g", approx, tu_rel_err(dx, fd, n));
        CHECK(tu_guard_ok(dx, 8 * n), "guard");
        float xf[37], Rf[37], yf[37], dxf[37];
        double y[37];
        tu_to_f32(xf, c.x, n);
        tu_to_f32(Rf, c.R, n);
        tr_k_gelu_fwd_f64(y, c.x, n, approx);
        tr_k_gelu_fwd_f32(yf, xf, n, approx);
        tr_k_gelu_bwd_f32(dxf, Rf, xf, n, approx);
        CHECK(tu_rel_err_f32(yf, y, n) < 1e-5, "f32 forward %g", tu_rel_err_f32(yf, y, n));
        CHECK(tu_rel_err_f32(dxf, dx, n) < 1e-5, "f32 backward %g", tu_rel_err_f32(dxf, dx, n));
        tu_guarded_free(dx);
        free(fd); free(c.x); free(c.R); free(c.out);
    }
}

/* ------------------------------------------------------------ softmax */

typedef struct {
    double *x, *R, *out;
    int64_t N, C;
} sm_ctx;

static double sm_loss(void *p)
{
    sm_ctx *c = p;
    tr_k_softmax_fwd_f64(c->out, c->x, c->N, c->C);
    return tu_dot(c->out, c->R, c->N * c->C);
}

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

static void test_softmax_backward_finite_differences(void)
{
    static const int64_t shapes[][2] = { { 1, 1 }, { 3, 5 }, { 2, 67 } };
    tu_seed(23);
    for (int s = 0; s < 3; s++) {
        int64_t N = shapes[s][0], C = shapes[s][1], NC = N * C;
        sm_ctx c = { malloc(8 * NC), malloc(8 * NC), malloc(8 * NC), N, C };
        tu_fill(c.x, NC, 3);
        tu_fill(c.R, NC, 1);
        double *y = malloc(8 * NC), *dx = tu_guarded(8 * NC), *fd = malloc(8 * NC);
        tr_k_softmax_fwd_f64(y, c.x, N, C);
        tr_k_softmax_bwd_f64(dx, c.R, y, N, C);
        tu_fd_grad(fd, c.x, NC, sm_loss, &c);
        /* C == 1: softmax is constant 1, the gradient is exactly 0 */
        CHECK(C == 1 ? fabs(dx[0]) < 1e-15 : tu_rel_err(dx, fd, NC) < 1e-6, "N%lld C%lld rel err %g",
              (long long)N, (long long)C, tu_rel_err(dx, fd, NC));
        CHECK(tu_guard_ok(dx, 8 * NC), "guard");
        float *xf = malloc(4 * NC), *Rf = malloc(4 * NC), *yf = malloc(4 * NC), *dxf = malloc(4 * NC);
        tu_to_f32(xf, c.x, NC);
        tu_to_f32(Rf, c.R, NC);
        tr_k_softmax_fwd_f32(yf, xf, N, C);
        tr_k_softmax_bwd_f32(dxf, Rf, yf, N, C);
        CHECK(tu_rel_err_f32(yf, y, NC) < 1e-5, "f32 forward");
        CHECK(C == 1 || tu_rel_err_f32(dxf, dx, NC) < 1e-5, "f32 backward %g", tu_rel_err_f32(dxf, dx, NC));
        free(xf); free(Rf); free(yf); free(dxf);
        free(y); free(fd); tu_guarded_free(dx);
        free(c.x); free(c.R); free(c.out);
    }
}

int main(void)
{
    RUN(test_gelu_known_values);
    RUN(test_gelu_backward_finite_differences);
    RUN(test_softmax_rows_sum_to_one_without_overflow);
    RUN(test_softmax_backward_finite_differences);
    return check_done();
}
