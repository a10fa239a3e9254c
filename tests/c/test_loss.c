/* test_loss.c — cross-entropy kernels: the value against a direct log-softmax (with an
 * ignored row), f32 against f64, guard regions. The gradient against finite differences:
 * tests/c/test_ops_table.c. */
#include "check.h"
#include "op_check.h"

#include "cpu/loss.h"

static void test_value_and_f32(void)
{
    oc_seed(7);
    int64_t N = 5, K = 11;
    const int64_t t[] = { 3, 10, -100, 0, 7 };
    double *z = malloc(N * K * 8), *losses = malloc(N * 8), *lse = malloc(N * 8), *dz = malloc(N * K * 8);
    float *zf = malloc(N * K * 4), *lf = oc_guarded(N * 4), *lsef = oc_guarded(N * 4);
    float *dzf = oc_guarded(N * K * 4);
    oc_fill(z, N * K, 1);
    for (int64_t q = 0; q < N * K; q++) z[q] *= 4;
    int64_t cnt = tr_k_cross_entropy_fwd_f64(losses, lse, z, t, N, K, -100, 0);
    CHECK(cnt == 4, "count %lld", (long long)cnt);
    for (int64_t n = 0; n < N; n++) {
        double e = 0;
        for (int64_t k = 0; k < K; k++) e += exp(z[n * K + k]);
        double want = t[n] == -100 ? 0 : log(e) - z[n * K + t[n]];
        CHECK_CLOSE(losses[n], want, 1e-12, 1e-12);
    }
    oc_to_f32(zf, z, N * K);
    int64_t cntf = tr_k_cross_entropy_fwd_f32(lf, lsef, zf, t, N, K, -100, 0.1f);
    tr_k_cross_entropy_fwd_f64(losses, lse, z, t, N, K, -100, 0.1);
    CHECK(cntf == cnt, "f32 count %lld", (long long)cntf);
    close_f32("losses", lf, losses, N, 1e-5, 1e-6);
    close_f32("lse", lsef, lse, N, 1e-5, 1e-6);
    tr_k_cross_entropy_bwd_f64(dz, z, lse, t, 0.25, N, K, -100, 0.1);
    tr_k_cross_entropy_bwd_f32(dzf, zf, lsef, t, 0.25f, N, K, -100, 0.1f);
    close_f32("dlogits", dzf, dz, N * K, 1e-5, 1e-7);
    CHECK(oc_guard_ok(lf) && oc_guard_ok(lsef) && oc_guard_ok(dzf), "a kernel wrote outside its output");
    free(z), free(losses), free(lse), free(dz), free(zf);
    oc_guarded_free(lf), oc_guarded_free(lsef), oc_guarded_free(dzf);
}

int main(void)
{
    RUN(test_value_and_f32);
    return check_done();
}
