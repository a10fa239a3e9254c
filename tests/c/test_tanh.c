/* test_tanh.c — the tanh kernel's known values and the op's shape check. Gradients, f32
 * and bf16 through the op: tests/c/test_ops_table.c. */
#include "check.h"
#include "ctx_check.h"
#include "op_check.h"
#include "cpu/activation.h"
#include "trainer.h"

/* ------------------------------------------------------------ kernel */

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
    static const check_case cases[] = { CASE(test_tanh_known_values), CASE(test_tanh_op_shape_mismatch_is_user_error) };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
