/* test_sgd_adafactor.c — the SGD and Adafactor kernels (kernels/cpu/optim.c) against
 * float64 references written out from torch.optim.SGD and transformers' Adafactor
 * independently of the kernels, for 10 steps with changing gradients (f64 tightly, f32
 * loosely); closed-form first steps; and the ops (core/ops/ops_optim.h): half gradients,
 * the half weight copy, state-shape and argument errors, and no workspace left behind.
 * Finite differences do not apply to optimizer steps. */
#include "check.h"
#include "ctx_check.h"
#include "op_check.h"

#include "cpu/optim.h"
#include "trainer.h"

#include <string.h>

static tr_ctx *ctx;

/* ------------------------------------------------------------ references */

/* torch.optim.SGD's single-tensor step; *has_buf says whether the buffer exists yet. */
static void sgd_reference(double *p, double *buf, int *has_buf, const double *g_scaled, int n, double lr, double mom,
                          double damp, double wd, int nesterov, double grad_scale)
{
    for (int i = 0; i < n; i++) {
        double d = g_scaled[i] / grad_scale;
        if (wd != 0) d += wd * p[i];
        if (mom != 0) {
            buf[i] = *has_buf ? mom * buf[i] + (1 - damp) * d : d;
            d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
    *has_buf = 1;
}

typedef struct ref_cfg {
    double lr, eps1, eps2, clip, decay_rate, beta1, wd;   /* beta1 < 0: none */
    int relative_step, scale_parameter, warmup_init;
} ref_cfg;

/* transformers' Adafactor.step for one tensor of B matrices [R, C] (factored) or a
 * vector of n = R*C (B = 1, vec = 1), transcribed loop by loop. Returns the lr used. */
static double adafactor_reference(double *p, double *ea, double *row, double *col, double *v, const double *g, int B,
                                  int R, int C, int vec, int step, const ref_cfg *c)
{
    int n = B * R * C;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += p[i] * p[i];
    double rms = sqrt(ss) / sqrt((double)n);
    double rel = c->lr;
    if (c->relative_step) rel = fmin(c->warmup_init ? 1e-6 * step : 1e-2, 1 / sqrt((double)step));
    double lr = (c->scale_parameter ? fmax(c->eps2, rms) : 1) * rel;
    double beta2t = 1 - pow(step, c->decay_rate);
    double *u = malloc(sizeof(double) * (size_t)n);
    if (!vec) {
        for (int b = 0; b < B; b++) {
            const double *gb = g + b * R * C;
            for (int r = 0; r < R; r++) {
                double m = 0;
                for (int j = 0; j < C; j++) m += gb[r * C + j] * gb[r * C + j] + c->eps1;
                row[b * R + r] = row[b * R + r] * beta2t + (1 - beta2t) * (m / C);
            }
            for (int j = 0; j < C; j++) {
                double m = 0;
                for (int r = 0; r < R; r++) m += gb[r * C + j] * gb[r * C + j] + c->eps1;
                col[b * C + j] = col[b * C + j] * beta2t + (1 - beta2t) * (m / R);
            }
            double rmean = 0;
            for (int r = 0; r < R; r++) rmean += row[b * R + r] / R;
            for (int r = 0; r < R; r++)
                for (int j = 0; j < C; j++)
                    u[b * R * C + r * C + j] =
                        1 / sqrt(row[b * R + r] / rmean) * (1 / sqrt(col[b * C + j])) * gb[r * C + j];
        }
    } else {
        for (int i = 0; i < n; i++) {
            v[i] = v[i] * beta2t + (1 - beta2t) * (g[i] * g[i] + c->eps1);
            u[i] = g[i] / sqrt(v[i]);
        }
    }
    double uu = 0;
    for (int i = 0; i < n; i++) uu += u[i] * u[i];
    double div = fmax(sqrt(uu) / sqrt((double)n) / c->clip, 1.0);
    for (int i = 0; i < n; i++) {
        u[i] = u[i] / div * lr;
        if (c->beta1 >= 0) u[i] = ea[i] = ea[i] * c->beta1 + (1 - c->beta1) * u[i];
        if (c->wd != 0) p[i] += p[i] * (-c->wd * lr);
        p[i] -= u[i];
    }
    free(u);
    return lr;
}

/* ------------------------------------------------------------ sgd kernels */

static void run_sgd(double mom, double damp, double wd, int nesterov, uint64_t seed)
{
    enum { n = 41 };
    oc_seed(seed);
    double p[n], buf[n] = { 0 }, g[n], pd[n], bd[n] = { 0 };
    float pf[n], bf[n] = { 0 }, gf[n];
    int has = 0;
    const double lr = 0.05, scale = 8;
    oc_fill(p, n, 1);
    memcpy(pd, p, sizeof p);
    oc_to_f32(pf, p, n);
    for (int step = 1; step <= 10; step++) {
        oc_fill(g, n, 1);
        for (int i = 0; i < n; i++) g[i] *= scale;
        oc_to_f32(gf, g, n);
        sgd_reference(p, buf, &has, g, n, lr, mom, damp, wd, nesterov, scale);
        tr_k_sgd_step_f64(pd, bd, g, n, lr, mom, damp, wd, nesterov, step == 1, scale);
        tr_k_sgd_step_f32(pf, bf, gf, n, (float)lr, (float)mom, (float)damp, (float)wd, nesterov, step == 1, (float)scale);
    }
    for (int i = 0; i < n; i++) {
        CHECK_CLOSE(pd[i], p[i], 1e-14, 1e-12);
        CHECK_CLOSE(bd[i], buf[i], 1e-14, 1e-12);
    }
    close_f32("sgd param f32", pf, p, n, 1e-6, 1e-6);
    close_f32("sgd buf f32", bf, buf, n, 1e-5, 1e-6);
}

static void test_sgd_momentum(void) { run_sgd(0.9, 0, 0.01, 0, 1); }
static void test_sgd_nesterov(void) { run_sgd(0.9, 0, 0.01, 1, 2); }
static void test_sgd_dampening(void) { run_sgd(0.8, 0.3, 0, 0, 3); }
static void test_sgd_plain(void) { run_sgd(0, 0, 0.1, 0, 4); }

/* The first momentum step copies d into the buffer (no dampening, as torch): with
 * damping 0.5 the step is still lr * (g + wd p). */
static void test_sgd_first_step_closed_form(void)
{
    double p[3] = { 1, -2, 0.5 }, b[3] = { 0 }, g[3] = { 0.5, 0.25, -1 };
    double want[3], wantb[3];
    for (int i = 0; i < 3; i++) wantb[i] = g[i] + 0.1 * p[i], want[i] = p[i] - 0.2 * wantb[i];
    tr_k_sgd_step_f64(p, b, g, 3, 0.2, 0.9, 0.5, 0.1, 0, 1, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(p[i], want[i], 1e-15, 1e-15);
        CHECK_CLOSE(b[i], wantb[i], 1e-15, 1e-15);
    }
}

/* ------------------------------------------------------------ adafactor kernels */

static adafactor_hparams hparams(const ref_cfg *c, int step)
{
    adafactor_hparams h = { .lr = c->lr, .eps1 = c->eps1, .eps2 = c->eps2, .clip_threshold = c->clip,
                            .decay_rate = c->decay_rate, .beta1 = c->beta1, .weight_decay = c->wd,
                            .relative_step = c->relative_step, .scale_parameter = c->scale_parameter,
                            .warmup_init = c->warmup_init, .step = step, .grad_scale = 1 };
    return h;
}

/* 10 steps of B matrices [R, C] (vec = 0) or a vector of R*C: the f64 kernel matches the
 * reference to 1e-12, the f32 kernel to f32 rounding. grad_mul scales gradients (small
 * ones make eps2 and the clipping matter). */
static void run_adafactor(const ref_cfg *c, int B, int R, int C, int vec, double grad_mul, uint64_t seed)
{
    int n = B * R * C, nr = vec ? 0 : B * R, nc = vec ? 0 : B * C;
    oc_seed(seed);
    size_t dn = sizeof(double) * (size_t)n, fn = sizeof(float) * (size_t)n;
    double *p = malloc(dn), *g = malloc(dn), *ea = calloc((size_t)n, 8), *v = calloc((size_t)n, 8);
    double *row = calloc((size_t)nr + 1, 8), *col = calloc((size_t)nc + 1, 8);
    double *pd = malloc(dn), *ead = calloc((size_t)n, 8), *vd = calloc((size_t)n, 8);
    double *rowd = calloc((size_t)nr + 1, 8), *cold = calloc((size_t)nc + 1, 8), *work = malloc(8 * (size_t)(B * (R + C)));
    float *pf = malloc(fn), *gf = malloc(fn), *eaf = calloc((size_t)n, 4), *vf = calloc((size_t)n, 4);
    float *rowf = calloc((size_t)nr + 1, 4), *colf = calloc((size_t)nc + 1, 4);
    oc_fill(p, n, 1);
    memcpy(pd, p, dn);
    oc_to_f32(pf, p, n);
    double want_lr = 0, lr64 = 0, lr32 = 0;
    for (int step = 1; step <= 10; step++) {
        oc_fill(g, n, 1);
        for (int i = 0; i < n; i++) g[i] *= grad_mul;
        oc_to_f32(gf, g, n);
        adafactor_hparams h = hparams(c, step);
        int64_t kb = vec ? 1 : B, kr = vec ? 1 : R, kc = vec ? n : C;
        want_lr = adafactor_reference(p, ea, row, col, v, g, vec ? 1 : B, R, C, vec, step, c);
        lr64 = tr_k_adafactor_step_f64(pd, c->beta1 >= 0 ? ead : NULL, vec ? NULL : rowd, vec ? NULL : cold,
                                  vec ? vd : NULL, vec ? NULL : work, g, kb, kr, kc, &h);
        lr32 = tr_k_adafactor_step_f32(pf, c->beta1 >= 0 ? eaf : NULL, vec ? NULL : rowf, vec ? NULL : colf,
                                  vec ? vf : NULL, vec ? NULL : work, gf, kb, kr, kc, &h);
    }
    CHECK_CLOSE(lr64, want_lr, 0, 1e-12);
    CHECK_CLOSE(lr32, want_lr, 0, 1e-5);
    for (int i = 0; i < n; i++) CHECK_CLOSE(pd[i], p[i], 1e-14, 1e-11);
    for (int i = 0; i < n && c->beta1 >= 0; i++) CHECK_CLOSE(ead[i], ea[i], 1e-16, 1e-10);
    for (int i = 0; i < nr; i++) CHECK_CLOSE(rowd[i], row[i], 0, 1e-12);
    for (int i = 0; i < nc; i++) CHECK_CLOSE(cold[i], col[i], 0, 1e-12);
    for (int i = 0; vec && i < n; i++) CHECK_CLOSE(vd[i], v[i], 0, 1e-12);
    close_f32("adafactor param f32", pf, p, n, 2e-5, 1e-6);
    free(p), free(g), free(ea), free(v), free(row), free(col), free(pd), free(ead), free(vd), free(rowd), free(cold);
    free(work), free(pf), free(gf), free(eaf), free(vf), free(rowf), free(colf);
}

static const ref_cfg defaults = { .lr = 0, .eps1 = 1e-30, .eps2 = 1e-3, .clip = 1, .decay_rate = -0.8, .beta1 = -1,
                                  .wd = 0, .relative_step = 1, .scale_parameter = 1, .warmup_init = 0 };
static const ref_cfg explicit_lr = { .lr = 1e-2, .eps1 = 1e-30, .eps2 = 1e-3, .clip = 1, .decay_rate = -0.8,
                                     .beta1 = -1, .wd = 0, .relative_step = 0, .scale_parameter = 0, .warmup_init = 0 };
static const ref_cfg everything = { .lr = 0, .eps1 = 1e-30, .eps2 = 1e-3, .clip = 0.5, .decay_rate = -0.8,
                                    .beta1 = 0.9, .wd = 0.1, .relative_step = 1, .scale_parameter = 1,
                                    .warmup_init = 1 };

static void test_adafactor_defaults_matrix(void) { run_adafactor(&defaults, 1, 5, 7, 0, 1, 11); }
static void test_adafactor_defaults_vector(void) { run_adafactor(&defaults, 1, 1, 9, 1, 1, 12); }
static void test_adafactor_defaults_batched(void) { run_adafactor(&defaults, 3, 4, 6, 0, 1, 13); }
static void test_adafactor_explicit_lr(void)
{
    run_adafactor(&explicit_lr, 1, 6, 3, 0, 1e-3, 14);
    run_adafactor(&explicit_lr, 1, 1, 6, 1, 1e-3, 15);
}
static void test_adafactor_beta1_decay_warmup(void)
{
    run_adafactor(&everything, 1, 8, 5, 0, 10, 16);
    run_adafactor(&everything, 1, 1, 17, 1, 10, 17);
}

/* Step 1 of a vector: beta2 is 0, so v = g^2 + eps1 and u = g / |g| (RMS 1, no clip):
 * param -= min(1e-2, 1) * max(1e-3, RMS(param)) * sign(g). */
static void test_adafactor_first_step_closed_form(void)
{
    double p[4] = { 0.3, -0.4, 1.2, 0.0 }, v[4] = { 0 }, g[4] = { 0.5, -2, 1e-3, 7 }, want[4];
    double rms = sqrt((0.09 + 0.16 + 1.44) / 4), lr = 1e-2 * rms;
    for (int i = 0; i < 4; i++) want[i] = p[i] - lr * (g[i] > 0 ? 1 : -1);
    adafactor_hparams h = hparams(&defaults, 1);
    double used = tr_k_adafactor_step_f64(p, NULL, NULL, NULL, v, NULL, g, 1, 1, 4, &h);
    CHECK_CLOSE(used, lr, 0, 1e-15);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(p[i], want[i], 1e-15, 1e-12);
}

/* ------------------------------------------------------------ ops */

static tr_tensor *mk(int ndim, const int64_t *shape, int dtype, int tag, const double *vals)
{
    tr_tensor *t = tr_tensor_zeros(ctx, ndim, shape, dtype, TR_CPU, tag);
    if (t && vals) {
        float *f = malloc((size_t)t->numel * 4 + 4);
        oc_to_f32(f, vals, t->numel);
        tr_convert(t->data, dtype, f, TR_F32, (size_t)t->numel);
        free(f);
    }
    return t;
}

/* tr_op_sgd(ctx, ...) must refuse its arguments: a user error whose message holds want
 * (a failure says what was accepted). */
#define SGD_REFUSED(want, what, ...)                                                                              \
    CHECK(tr_op_sgd(ctx, __VA_ARGS__) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), want), what ": %s",             \
          tr_ctx_errmsg(ctx))

/* A bf16 gradient through the op equals the kernel on the rounded gradient; the half
 * copy holds the rounded new param. */
static void test_op_sgd(void)
{
    enum { n = 5000 };
    int64_t nn = n;
    oc_seed(21);
    double *p = malloc(n * 8), *g = malloc(n * 8);
    float *pf = malloc(n * 4), *gf = malloc(n * 4), *bf = calloc(n, 4), *hf = malloc(n * 4);
    oc_fill(p, n, 1), oc_fill(g, n, 1);
    tr_tensor *tp = mk(1, &nn, TR_F32, TR_TAG_WEIGHTS, p), *tg = mk(1, &nn, TR_BF16, TR_TAG_GRADS, g);
    tr_tensor *tb = mk(1, &nn, TR_F32, TR_TAG_OPTIMIZER, NULL), *th = mk(1, &nn, TR_F16, TR_TAG_WEIGHTS, NULL);
    memcpy(pf, tp->data, n * 4);
    tr_convert(gf, TR_F32, tg->data, TR_BF16, n);
    for (int step = 1; step <= 3; step++) {
        CHECK(tr_op_sgd(ctx, tp, tg, tb, th, 0.1f, 0.9f, 0, 0.01f, 1, step, 4, NULL, NULL, 0) == TR_OK,
              "sgd: %s", tr_ctx_errmsg(ctx));
        tr_k_sgd_step_f32(pf, bf, gf, n, 0.1f, 0.9f, 0, 0.01f, 1, step == 1, 4);
    }
    CHECK(memcmp(pf, tp->data, n * 4) == 0, "op and kernel differ");
    CHECK(memcmp(bf, tb->data, n * 4) == 0, "momentum buffers differ");
    tr_convert(hf, TR_F32, th->data, TR_F16, n);
    for (int i = 0; i < n; i++) CHECK_CLOSE(hf[i], pf[i], 1e-4, 1e-3);
    /* errors */
    SGD_REFUSED("momentum_buf", "missing buffer accepted",
                tp, tg, NULL, NULL, 0.1f, 0.9f, 0, 0, 0, 1, 1, NULL, NULL, 0);
    SGD_REFUSED("nesterov", "nesterov with dampening accepted",
                tp, tg, tb, NULL, 0.1f, 0.9f, 0.1f, 0, 1, 1, 1, NULL, NULL, 0);
    SGD_REFUSED("must be f32", "f16 buffer accepted", tp, tg, th, NULL, 0.1f, 0.9f, 0, 0, 0, 1, 1, NULL, NULL, 0);
    CHECK(tr_op_sgd(ctx, tp, tg, NULL, NULL, 0.1f, 0, 0, 0, 0, 0, 1, NULL, NULL, 0) == TR_EUSER, "step 0 accepted");
    CHECK(tr_op_sgd(ctx, tp, tg, NULL, NULL, 0.1f, 0, 0, 0, 0, 1, 0, NULL, NULL, 0) == TR_EUSER,
          "grad_scale 0 accepted");
    CHECK(tr_op_sgd(ctx, tp, tg, NULL, NULL, 0.1f, 0, 0, 0, 0, 1, 1, NULL, NULL, 0) == TR_OK, "plain sgd: %s",
          tr_ctx_errmsg(ctx));
    /* the skip arguments: one i32 element each, and an effective step from 1 */
    int64_t one = 1;
    tr_tensor *f32flag = mk(1, &one, TR_F32, TR_TAG_OPTIMIZER, NULL);
    tr_tensor *count = mk(1, &one, TR_I32, TR_TAG_OPTIMIZER, NULL);
    SGD_REFUSED("sgd: skip_if has dtype f32", "an f32 skip flag accepted",
                tp, tg, NULL, NULL, 0.1f, 0, 0, 0, 0, 1, 1, f32flag, NULL, 0);
    SGD_REFUSED("sgd: skipped has dtype f32", "an f32 skip count accepted",
                tp, tg, NULL, NULL, 0.1f, 0, 0, 0, 0, 1, 1, NULL, f32flag, 0);
    ((int32_t *)count->data)[0] = 3;
    SGD_REFUSED("sgd: step 2 less the 2 skips", "an effective step of 0 accepted",
                tp, tg, NULL, NULL, 0.1f, 0, 0, 0, 0, 2, 1, NULL, count, 1);
    tr_tensor_free(f32flag), tr_tensor_free(count);
    free(p), free(g), free(pf), free(gf), free(bf), free(hf);
    tr_tensor_free(tp), tr_tensor_free(tg), tr_tensor_free(tb), tr_tensor_free(th);
}

static void test_op_adafactor(void)
{
    int64_t sh[3] = { 2, 30, 40 }, shr[2] = { 2, 30 }, shc[2] = { 2, 40 }, nn = 2400;
    oc_seed(22);
    double *p = malloc(2400 * 8), *g = malloc(2400 * 8);
    oc_fill(p, 2400, 1), oc_fill(g, 2400, 1);
    tr_tensor *tp = mk(3, sh, TR_F32, TR_TAG_WEIGHTS, p), *tg = mk(3, sh, TR_F16, TR_TAG_GRADS, g);
    tr_tensor *tr = mk(2, shr, TR_F32, TR_TAG_OPTIMIZER, NULL), *tc = mk(2, shc, TR_F32, TR_TAG_OPTIMIZER, NULL);
    tr_tensor *te = mk(3, sh, TR_F32, TR_TAG_OPTIMIZER, NULL), *tv = mk(1, &nn, TR_F32, TR_TAG_OPTIMIZER, NULL);
    float *pf = malloc(2400 * 4), *gf = malloc(2400 * 4), *rf = calloc(60, 4), *cf = calloc(80, 4), *ef = calloc(2400, 4);
    double work[2 * 70];
    memcpy(pf, tp->data, 2400 * 4);
    tr_convert(gf, TR_F32, tg->data, TR_F16, 2400);
    tr_adafactor_config cfg = { .lr = 0, .eps1 = 1e-30f, .eps2 = 1e-3f, .clip_threshold = 1, .decay_rate = -0.8f,
                                .beta1 = 0.9f, .weight_decay = 0.01f, .relative_step = 1, .scale_parameter = 1 };
    ref_cfg rc = { .lr = 0, .eps1 = 1e-30f, .eps2 = 1e-3f, .clip = 1, .decay_rate = -0.8f, .beta1 = 0.9f,
                   .wd = 0.01f, .relative_step = 1, .scale_parameter = 1 };
    tr_alloc_stats before, after;
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &before);
    float used = 0;
    for (int step = 1; step <= 3; step++) {
        CHECK(tr_op_adafactor(ctx, tp, tg, te, tr, tc, NULL, NULL, &cfg, step, 2, &used, NULL, NULL, 0) == TR_OK,
              "adafactor: %s", tr_ctx_errmsg(ctx));
        adafactor_hparams h = hparams(&rc, step);
        h.grad_scale = 2;
        double lr = tr_k_adafactor_step_f32(pf, ef, rf, cf, NULL, work, gf, 2, 30, 40, &h);
        CHECK(used == (float)lr, "lr used %g vs %g", (double)used, lr);
    }
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &after);
    CHECK(after.allocated == before.allocated, "workspace kept: %lld -> %lld bytes", (long long)before.allocated,
          (long long)after.allocated);
    CHECK(memcmp(pf, tp->data, 2400 * 4) == 0, "op and kernel differ");
    CHECK(memcmp(rf, tr->data, 60 * 4) == 0 && memcmp(cf, tc->data, 80 * 4) == 0, "factors differ");
    /* errors: a v for a matrix, a wrong row size, a missing exp_avg, lr with relative_step */
    CHECK(tr_op_adafactor(ctx, tp, tg, te, tr, tc, tv, NULL, &cfg, 4, 1, NULL, NULL, NULL, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "factored"),
          "v accepted for a matrix: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_adafactor(ctx, tp, tg, te, tc, tc, NULL, NULL, &cfg, 4, 1, NULL, NULL, NULL, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "row"),
          "wrong row size accepted: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_adafactor(ctx, tp, tg, NULL, tr, tc, NULL, NULL, &cfg, 4, 1, NULL, NULL, NULL, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "exp_avg"),
          "missing exp_avg accepted: %s", tr_ctx_errmsg(ctx));
    cfg.lr = 1e-3f;
    CHECK(tr_op_adafactor(ctx, tp, tg, te, tr, tc, NULL, NULL, &cfg, 4, 1, NULL, NULL, NULL, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "relative_step"),
          "lr with relative_step accepted: %s", tr_ctx_errmsg(ctx));
    /* a vector takes v and refuses row/col */
    tr_tensor *vp = mk(1, &nn, TR_F32, TR_TAG_WEIGHTS, p), *vg = mk(1, &nn, TR_F32, TR_TAG_GRADS, g);
    cfg.lr = 0, cfg.beta1 = -1;
    CHECK(tr_op_adafactor(ctx, vp, vg, NULL, NULL, NULL, tv, NULL, &cfg, 1, 1, NULL, NULL, NULL, 0) == TR_OK,
          "vector: %s",
          tr_ctx_errmsg(ctx));
    CHECK(tr_op_adafactor(ctx, vp, vg, NULL, tr, NULL, tv, NULL, &cfg, 2, 1, NULL, NULL, NULL, 0) == TR_EUSER,
          "row for a vector");
    /* an explicit lr of 0 (a schedule's first warm-up step) leaves the parameter as it is */
    float *vbefore = malloc(2400 * 4);
    memcpy(vbefore, vp->data, 2400 * 4);
    cfg.relative_step = 0, cfg.scale_parameter = 0, cfg.lr = 0;
    CHECK(tr_op_adafactor(ctx, vp, vg, NULL, NULL, NULL, tv, NULL, &cfg, 2, 1, &used, NULL, NULL, 0) == TR_OK &&
          used == 0,
          "lr 0: %s", tr_ctx_errmsg(ctx));
    CHECK(memcmp(vbefore, vp->data, 2400 * 4) == 0, "lr 0 moved the parameter");
    free(vbefore);
    free(p), free(g), free(pf), free(gf), free(rf), free(cf), free(ef);
    tr_tensor_free(tp), tr_tensor_free(tg), tr_tensor_free(tr), tr_tensor_free(tc), tr_tensor_free(te);
    tr_tensor_free(tv), tr_tensor_free(vp), tr_tensor_free(vg);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_sgd_momentum), CASE(test_sgd_nesterov), CASE(test_sgd_dampening), CASE(test_sgd_plain),
        CASE(test_sgd_first_step_closed_form), CASE(test_adafactor_defaults_matrix),
        CASE(test_adafactor_defaults_vector), CASE(test_adafactor_defaults_batched), CASE(test_adafactor_explicit_lr),
        CASE(test_adafactor_beta1_decay_warmup), CASE(test_adafactor_first_step_closed_form), CASE(test_op_sgd),
        CASE(test_op_adafactor)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
