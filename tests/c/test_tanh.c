/* test_tanh.c — the tanh kernel and op: known values, backward (from the output y) against
 * central finite differences in f64, f32 against f64, the tensor op in f32 and bf16 with
 * its shape check, and the backward's dx = dout * (1 - y^2) through the op. */
#include "check.h"
#include "nn_testutil.h"
#include "cpu/tanh.h"
#include "trainer.h"

/* ------------------------------------------------------------ kernel */

typedef struct {
    double *x, *R, *out;
    int64_t n;
} tanh_ctx;

static double tanh_loss(void *p)
{
    tanh_ctx *c = p;
    tr_k_tanh_fwd_f64(c->out, c->x, c->n);
    return tu_dot(c->out, c->R, c->n);
}

static void test_tanh_known_values(void)
{
    double x[4] = { 0.0, 0.5, -1.0, 20.0 }, y[4];
    tr_k_tanh_fwd_f64(y, x, 4);
    /* Python float64 math.tanh */
    CHECK_CLOSE(y[0], 0.0, 1e-15, 1e-14);
    CHECK_CLOSE(y[1], 0.46211715726000974, 1e-15, 1e-14);
    CHECK_CLOSE(y[2], -0.7615941559557649, 1e-15, 1e-14);
    CHECK_CLOSE(y[3], 1.0, 1e-15, 1e-14);
}

static void test_tanh_backward_finite_differences(void)
{
    int64_t n = 41;
    tanh_ctx c = { malloc(8 * n), malloc(8 * n), malloc(8 * n), n };
    double *dx = tu_guarded(8 * n), *fd = malloc(8 * n), *y = malloc(8 * n);
    tu_seed(31);
    tu_fill(c.x, n, 3);
    tu_fill(c.R, n, 1);
    tr_k_tanh_fwd_f64(y, c.x, n);
    tr_k_tanh_bwd_f64(dx, c.R, y, n);
    tu_fd_grad(fd, c.x, n, tanh_loss, &c);
    CHECK(tu_rel_err(dx, fd, n) < 1e-6, "rel err %g", tu_rel_err(dx, fd, n));
    CHECK(tu_guard_ok(dx, 8 * n), "guard");
    float xf[41], Rf[41], yf[41], dxf[41];
    tu_to_f32(xf, c.x, n);
    tu_to_f32(Rf, c.R, n);
    tr_k_tanh_fwd_f32(yf, xf, n);
    tr_k_tanh_bwd_f32(dxf, Rf, yf, n);
    CHECK(tu_rel_err_f32(yf, y, n) < 1e-6, "f32 forward %g", tu_rel_err_f32(yf, y, n));
    CHECK(tu_rel_err_f32(dxf, dx, n) < 1e-5, "f32 backward %g", tu_rel_err_f32(dxf, dx, n));
    tu_guarded_free(dx);
    free(fd); free(y); free(c.x); free(c.R); free(c.out);
}

/* ------------------------------------------------------------ op */

static tr_ctx *ctx;

static tr_tensor *vec(const float *v, int64_t n, int dtype)
{
    tr_tensor *f = tr_tensor_new(ctx, 1, &n, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    CHECK(f != NULL, "alloc");
    tr_tensor_write(ctx, f, v, (size_t)n * 4);
    if (dtype == TR_F32) return f;
    tr_tensor *h = tr_tensor_new(ctx, 1, &n, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    CHECK(tr_tensor_copy(ctx, h, f) == TR_OK, "copy");
    tr_tensor_free(f);
    return h;
}

static void read_f32(const tr_tensor *t, float *out)
{
    tr_tensor *f = tr_tensor_new(ctx, t->ndim, t->shape, TR_F32, TR_CPU, TR_TAG_WORKSPACE);
    CHECK(tr_tensor_copy(ctx, f, t) == TR_OK, "copy");
    tr_tensor_read(ctx, f, out, (size_t)t->numel * 4);
    tr_tensor_free(f);
}

static void test_tanh_op_f32_and_bf16(void)
{
    const float xv[5] = { -2.0f, -0.25f, 0.0f, 0.75f, 3.0f }, dv[5] = { 1, -2, 0.5f, 3, -1 };
    for (int k = 0; k < 2; k++) {
        int dtype = k ? TR_BF16 : TR_F32;
        double tol = k ? 1e-2 : 1e-6;
        tr_tensor *x = vec(xv, 5, dtype), *d = vec(dv, 5, dtype);
        tr_tensor *y = tr_tensor_new(ctx, 1, x->shape, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
        tr_tensor *dx = tr_tensor_new(ctx, 1, x->shape, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
        CHECK(tr_op_tanh(ctx, y, x) == TR_OK, "tanh: %s", tr_ctx_err(ctx)->msg);
        CHECK(tr_op_tanh_backward(ctx, dx, d, y) == TR_OK, "tanh_backward: %s", tr_ctx_err(ctx)->msg);
        float yo[5], dxo[5];
        read_f32(y, yo);
        read_f32(dx, dxo);
        for (int i = 0; i < 5; i++) {
            double t = tanh((double)xv[i]);
            CHECK_CLOSE(yo[i], t, tol, tol);
            CHECK_CLOSE(dxo[i], dv[i] * (1 - (double)yo[i] * yo[i]), tol, tol);
        }
        tr_tensor_free(x); tr_tensor_free(d); tr_tensor_free(y); tr_tensor_free(dx);
    }
}

static void test_tanh_op_shape_mismatch_is_user_error(void)
{
    const float v[5] = { 0 };
    tr_tensor *x = vec(v, 5, TR_F32), *y = vec(v, 4, TR_F32);
    CHECK(tr_op_tanh(ctx, y, x) == TR_EUSER, "a 4-element out for a 5-element x is refused");
    CHECK(strstr(tr_ctx_err(ctx)->msg, "tanh") != NULL, "message names the op: %s", tr_ctx_err(ctx)->msg);
    CHECK(tr_op_tanh_backward(ctx, x, x, NULL) == TR_EUSER, "NULL y is refused");
    tr_tensor_free(x); tr_tensor_free(y);
}

int main(void)
{
    ctx = tr_ctx_new();
    RUN(test_tanh_known_values);
    RUN(test_tanh_backward_finite_differences);
    RUN(test_tanh_op_f32_and_bf16);
    RUN(test_tanh_op_shape_mismatch_is_user_error);
    tr_ctx_free(ctx);
    return check_done();
}
