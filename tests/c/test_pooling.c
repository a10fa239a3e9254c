/* test_pooling.c — masked pooling kernels (mean, cls, max, mean_sqrt_len): values with
 * padded positions and an all-padding row against a direct computation, f32 against f64,
 * guard regions. Gradients against finite differences: tests/c/test_ops_table.c. */
#include "check.h"
#include "op_check.h"

#include "cpu/pooling.h"

/* B = 3 rows: one full, one padded at the end, one all padding. */
static const int32_t mask3x5[] = { 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0 };

static void test_values_and_f32(void)
{
    oc_seed(9);
    int64_t B = 3, T = 5, C = 7, nh = B * T * C;
    double *h = malloc(nh * 8), *out = malloc(B * C * 8), *d = malloc(B * C * 8), *dh = malloc(nh * 8);
    float *hf = malloc(nh * 4), *df = malloc(B * C * 4), *of = oc_guarded(B * C * 4), *dhf = oc_guarded(nh * 4);
    oc_fill(h, nh, 1), oc_fill(d, B * C, 1);
    oc_to_f32(hf, h, nh), oc_to_f32(df, d, B * C);
    for (int mode = 0; mode < 4; mode++) {
        tr_k_pool_fwd_f64(out, h, mask3x5, B, T, C, mode);
        for (int64_t c = 0; c < C; c++) {
            /* row 1 keeps tokens 0 and 1; row 2 keeps nothing */
            double a = h[(T + 0) * C + c], b = h[(T + 1) * C + c];
            double want = mode == 0 ? (a + b) / 2 : mode == 1 ? a : mode == 2 ? fmax(a, b) : (a + b) / sqrt(2.0);
            CHECK_CLOSE(out[C + c], want, 1e-12, 1e-12);
            CHECK(out[2 * C + c] == (mode == 1 ? h[2 * T * C + c] : 0), "mode %d: all-padding row", mode);
        }
        tr_k_pool_fwd_f32(of, hf, mask3x5, B, T, C, mode);
        close_f32("forward", of, out, B * C, 1e-6, 1e-6);
        tr_k_pool_bwd_f64(dh, d, h, mask3x5, B, T, C, mode);
        tr_k_pool_bwd_f32(dhf, df, hf, mask3x5, B, T, C, mode);
        close_f32("backward", dhf, dh, nh, 1e-6, 1e-6);
    }
    CHECK(oc_guard_ok(of) && oc_guard_ok(dhf), "a kernel wrote outside its output");
    free(h), free(out), free(d), free(dh), free(hf), free(df), oc_guarded_free(of), oc_guarded_free(dhf);
}

int main(void)
{
    RUN(test_values_and_f32);
    return check_done();
}
