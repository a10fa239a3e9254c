/* test_pooling.c — masked pooling kernels (mean, cls, max, mean_sqrt_len): backward
 * against float64 finite differences with padded positions and an all-padding row,
 * values against a direct computation, f32 against f64, guard regions. */
#include "check.h"
#include "opselem_check.h"

#include "cpu/pooling.h"

typedef struct {
    double *h, *r, *out;
    const int32_t *mask;
    int64_t B, T, C;
    int mode;
} pool_case;

static double pool_loss(void *u)
{
    pool_case *p = u;
    tr_k_pool_fwd_f64(p->out, p->h, p->mask, p->B, p->T, p->C, p->mode);
    return dot(p->r, p->out, p->B * p->C);
}

/* B = 3 rows: one full, one padded at the end, one all padding. */
static const int32_t mask3x5[] = { 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0 };
static const int32_t mask1x1[] = { 1 };

static void test_backward_fd(void)
{
    uint64_t s = 8;
    for (int mode = 0; mode < 4; mode++)
        for (int shape = 0; shape < 3; shape++) {
            int64_t B = shape == 0 ? 3 : 1, T = shape == 0 ? 5 : 1, C = shape == 2 ? 1 : (shape ? 4 : 7);
            const int32_t *mask = shape == 0 ? mask3x5 : mask1x1;
            int64_t nh = B * T * C;
            double *h = malloc(nh * 8), *r = malloc(B * C * 8), *out = malloc(B * C * 8), *dh = malloc(nh * 8);
            rand_fill(h, nh, &s), rand_fill(r, B * C, &s);
            pool_case p = { h, r, out, mask, B, T, C, mode };
            tr_k_pool_bwd_f64(dh, r, h, mask, B, T, C, mode);
            fd_check("dhidden", h, nh, dh, pool_loss, &p);
            if (shape == 0 && mode != 1)
                for (int64_t t = 2; t < T; t++)
                    for (int64_t c = 0; c < C; c++)
                        CHECK(dh[(1 * T + t) * C + c] == 0, "mode %d: padded position got a gradient", mode);
            free(h), free(r), free(out), free(dh);
        }
}

static void test_values_and_f32(void)
{
    uint64_t s = 9;
    int64_t B = 3, T = 5, C = 7, nh = B * T * C;
    double *h = malloc(nh * 8), *out = malloc(B * C * 8), *d = malloc(B * C * 8), *dh = malloc(nh * 8);
    float *hf = malloc(nh * 4), *df = malloc(B * C * 4), *of = guard_alloc(B * C * 4), *dhf = guard_alloc(nh * 4);
    rand_fill(h, nh, &s), rand_fill(d, B * C, &s);
    to_f32(hf, h, nh), to_f32(df, d, B * C);
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
    CHECK(guard_intact(of) && guard_intact(dhf), "a kernel wrote outside its output");
    free(h), free(out), free(d), free(dh), free(hf), free(df), guard_free(of), guard_free(dhf);
}

int main(void)
{
    RUN(test_backward_fd);
    RUN(test_values_and_f32);
    return check_done();
}
