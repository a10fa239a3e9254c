/* test_loss.c — cross-entropy kernels: the mean loss's gradient against float64 finite
 * differences (ignored rows, label smoothing, K = 1, odd sizes), the value against a
 * direct log-softmax, f32 against f64, guard regions. */
#include "check.h"
#include "opselem_check.h"

#include "cpu/loss.h"

typedef struct {
    double *logits, *losses, *lse;
    const int64_t *targets;
    int64_t N, K;
    double ls;
} ce_case;

static double ce_mean(void *u)
{
    ce_case *c = u;
    int64_t cnt = tr_k_cross_entropy_fwd_f64(c->losses, c->lse, c->logits, c->targets, c->N, c->K, -100, c->ls);
    double s = 0;
    for (int64_t n = 0; n < c->N; n++) s += c->losses[n];
    return cnt ? s / cnt : 0;
}

static void test_backward_fd(void)
{
    uint64_t s = 6;
    const int64_t targets[] = { 2, -100, 0, 4, 4, -100, 1 };
    const int64_t t1[] = { 0, -100, 0 };
    const int64_t shapes[][2] = { { 7, 5 }, { 1, 5 }, { 3, 1 }, { 7, 9 } };
    const double smoothing[] = { 0, 0.1 };
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            int64_t N = shapes[i][0], K = shapes[i][1];
            const int64_t *t = K == 1 ? t1 : targets;
            double *z = malloc(N * K * 8), *losses = malloc(N * 8), *lse = malloc(N * 8);
            double *dz = malloc(N * K * 8);
            rand_fill(z, N * K, &s);
            for (int64_t q = 0; q < N * K; q++) z[q] *= 3;
            ce_case c = { z, losses, lse, t, N, K, smoothing[j] };
            int64_t cnt = tr_k_cross_entropy_fwd_f64(losses, lse, z, t, N, K, -100, smoothing[j]);
            double g = 0.7;   /* the upstream gradient of the mean */
            tr_k_cross_entropy_bwd_f64(dz, z, lse, t, cnt ? g / cnt : 0, N, K, -100, smoothing[j]);
            for (int64_t q = 0; q < N * K; q++) dz[q] /= g;
            fd_check("dlogits", z, N * K, dz, ce_mean, &c);
            free(z), free(losses), free(lse), free(dz);
        }
}

static void test_value_and_f32(void)
{
    uint64_t s = 7;
    int64_t N = 5, K = 11;
    const int64_t t[] = { 3, 10, -100, 0, 7 };
    double *z = malloc(N * K * 8), *losses = malloc(N * 8), *lse = malloc(N * 8), *dz = malloc(N * K * 8);
    float *zf = malloc(N * K * 4), *lf = guard_alloc(N * 4), *lsef = guard_alloc(N * 4);
    float *dzf = guard_alloc(N * K * 4);
    rand_fill(z, N * K, &s);
    for (int64_t q = 0; q < N * K; q++) z[q] *= 4;
    int64_t cnt = tr_k_cross_entropy_fwd_f64(losses, lse, z, t, N, K, -100, 0);
    CHECK(cnt == 4, "count %lld", (long long)cnt);
    for (int64_t n = 0; n < N; n++) {
        double e = 0;
        for (int64_t k = 0; k < K; k++) e += exp(z[n * K + k]);
        double want = t[n] == -100 ? 0 : log(e) - z[n * K + t[n]];
        CHECK_CLOSE(losses[n], want, 1e-12, 1e-12);
    }
    to_f32(zf, z, N * K);
    int64_t cntf = tr_k_cross_entropy_fwd_f32(lf, lsef, zf, t, N, K, -100, 0.1f);
    tr_k_cross_entropy_fwd_f64(losses, lse, z, t, N, K, -100, 0.1);
    CHECK(cntf == cnt, "f32 count %lld", (long long)cntf);
    close_f32("losses", lf, losses, N, 1e-5, 1e-6);
    close_f32("lse", lsef, lse, N, 1e-5, 1e-6);
    tr_k_cross_entropy_bwd_f64(dz, z, lse, t, 0.25, N, K, -100, 0.1);
    tr_k_cross_entropy_bwd_f32(dzf, zf, lsef, t, 0.25f, N, K, -100, 0.1f);
    close_f32("dlogits", dzf, dz, N * K, 1e-5, 1e-7);
    CHECK(guard_intact(lf) && guard_intact(lsef) && guard_intact(dzf), "a kernel wrote outside its output");
    free(z), free(losses), free(lse), free(dz), free(zf);
    guard_free(lf), guard_free(lsef), guard_free(dzf);
}

int main(void)
{
    RUN(test_backward_fd);
    RUN(test_value_and_f32);
    return check_done();
}
