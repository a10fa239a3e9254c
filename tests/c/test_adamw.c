/* test_adamw.c — the fused AdamW kernel against a hand-written float64 reference of
 * torch.optim.AdamW for 10 steps (with weight decay, a loss scale on the gradients and
 * changing gradients), f32 and f64 instantiations. */
#include "check.h"
#include "op_check.h"

#include "cpu/optim.h"

/* torch.optim.AdamW's single-tensor step, written out independently of the kernel. */
static void adamw_reference(double *p, double *m, double *v, const double *g_scaled, int64_t n, double lr,
                            double b1, double b2, double eps, double wd, int step, double grad_scale)
{
    for (int64_t i = 0; i < n; i++) {
        double g = g_scaled[i] / grad_scale;
        p[i] *= 1 - lr * wd;
        m[i] = m[i] * b1 + g * (1 - b1);   /* exp_avg.lerp_(grad, 1 - beta1) */
        v[i] = v[i] * b2 + g * g * (1 - b2);
        double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        double denom = sqrt(v[i]) / sqrt(bc2) + eps;
        p[i] -= lr / bc1 * m[i] / denom;
    }
}

static void test_adamw_10_steps(void)
{
    oc_seed(14);
    enum { n = 37 };
    double p[n], m[n] = { 0 }, v[n] = { 0 }, g[n];
    double pd[n], md[n] = { 0 }, vd[n] = { 0 };
    float pf[n], mf[n] = { 0 }, vf[n] = { 0 }, gf[n];
    oc_fill(p, n, 1);
    memcpy(pd, p, sizeof p);
    oc_to_f32(pf, p, n);
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01, scale = 1024;
    for (int step = 1; step <= 10; step++) {
        oc_fill(g, n, 1);
        for (int i = 0; i < n; i++) g[i] *= scale * (i == 0 ? 1e-6 : 1);   /* one tiny gradient: eps matters */
        oc_to_f32(gf, g, n);
        adamw_reference(p, m, v, g, n, lr, b1, b2, eps, wd, step, scale);
        tr_k_adamw_step_f64(pd, md, vd, g, n, lr, b1, b2, eps, wd, step, scale);
        tr_k_adamw_step_f32(pf, mf, vf, gf, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, step, (float)scale);
    }
    for (int i = 0; i < n; i++) {
        CHECK_CLOSE(pd[i], p[i], 1e-14, 1e-12);
        CHECK_CLOSE(md[i], m[i], 1e-14, 1e-12);
        CHECK_CLOSE(vd[i], v[i], 1e-16, 1e-12);
    }
    close_f32("param f32", pf, p, n, 1e-5, 1e-6);
    close_f32("m f32", mf, m, n, 1e-4, 1e-7);
    close_f32("v f32", vf, v, n, 1e-4, 1e-9);
}

/* Known answer of the first step from zero moments, as torch computes it: the bias
 * corrections cancel, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps). */
static void test_adamw_first_step_closed_form(void)
{
    double p[4] = { 0.5, -1.0, 2.0, 0.0 }, m[4] = { 0 }, v[4] = { 0 }, g[4] = { 0.1, -3.0, 1e-9, 0.0 };
    const double lr = 0.1, wd = 0.5, eps = 1e-8;
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = p[i] * (1 - lr * wd) - lr * g[i] / (fabs(g[i]) + eps);
    tr_k_adamw_step_f64(p, m, v, g, 4, lr, 0.9, 0.999, eps, wd, 1, 1.0);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(p[i], want[i], 1e-15, 1e-12);
    CHECK_CLOSE(want[0], 0.5 * 0.95 - 0.1, 2e-8, 0);   /* by hand: eps shifts it by 1e-8 */
    CHECK_CLOSE(want[2], 2.0 * 0.95 - 0.1 * 1e-9 / (1e-9 + 1e-8), 1e-12, 0);
}

int main(void)
{
    RUN(test_adamw_10_steps);
    RUN(test_adamw_first_step_closed_form);
    return check_done();
}
