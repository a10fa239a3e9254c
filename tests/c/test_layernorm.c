/* test_layernorm.c — layernorm kernels: forward against a direct f64 formula, backward
 * (dx =, dweight +=, dbias +=, NULL gradients skipped) against central finite differences
 * in f64, f32 against f64, guard regions. */
#include "check.h"
#include "nn_testutil.h"
#include "cpu/layernorm.h"

typedef struct {
    double *x, *w, *b, *R, *out, *mean, *rstd;
    int64_t N, C;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    tr_k_layernorm_fwd_f64(c->out, c->mean, c->rstd, c->x, c->w, c->b, c->N, c->C, 1e-5);
    return tu_dot(c->out, c->R, c->N * c->C);
}

static void test_layernorm_forward_formula(void)
{
    int64_t N = 3, C = 7;
    double x[21], w[7], b[7], out[21], mean[3], rstd[3];
    tu_seed(10);
    tu_fill(x, N * C, 3);
    tu_fill(w, C, 1);
    tu_fill(b, C, 1);
    for (int64_t i = 0; i < N * C; i++) x[i] += 100;    /* a large mean must not hurt */
    tr_k_layernorm_fwd_f64(out, mean, rstd, x, w, b, N, C, 1e-5);
    for (int64_t n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += x[n * C + c] / C;
        for (int64_t c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m) / C;
        CHECK_CLOSE(mean[n], m, 1e-12, 1e-12);
        CHECK_CLOSE(rstd[n], 1 / sqrt(v + 1e-5), 1e-12, 1e-10);
        for (int64_t c = 0; c < C; c++)
            CHECK_CLOSE(out[n * C + c], (x[n * C + c] - m) / sqrt(v + 1e-5) * w[c] + b[c], 1e-10, 1e-10);
    }
}

static void test_layernorm_backward_finite_differences(void)
{
    static const int64_t shapes[][2] = { { 1, 1 }, { 1, 3 }, { 4, 7 }, { 5, 130 } };
    tu_seed(11);
    for (int s = 0; s < 4; s++) {
        int64_t N = shapes[s][0], C = shapes[s][1];
        ln_ctx c = { malloc(8 * N * C), malloc(8 * C), malloc(8 * C), malloc(8 * N * C),
                     malloc(8 * N * C), malloc(8 * N), malloc(8 * N), N, C };
        tu_fill(c.x, N * C, 2);
        tu_fill(c.w, C, 1);
        tu_fill(c.b, C, 1);
        tu_fill(c.R, N * C, 1);
        double *dx = tu_guarded(8 * N * C), *dw = tu_guarded(8 * C), *db = tu_guarded(8 * C);
        double *fd = malloc(8 * N * C);
        for (int64_t i = 0; i < C; i++) dw[i] = db[i] = 0.25;
        ln_loss(&c);
        tr_k_layernorm_bwd_f64(dx, dw, db, c.R, c.x, c.w, c.mean, c.rstd, N, C);
        for (int64_t i = 0; i < C; i++) dw[i] -= 0.25, db[i] -= 0.25;
        /* C == 1 makes the output independent of x: dx must be exactly zero then */
        tu_fd_grad(fd, c.x, N * C, ln_loss, &c);
        CHECK(tu_rel_err(dx, fd, N * C) < 1e-6 || (C == 1 && fabs(dx[0]) < 1e-9),
              "N%lld C%lld dx rel err %g", (long long)N, (long long)C, tu_rel_err(dx, fd, N * C));
        tu_fd_grad(fd, c.w, C, ln_loss, &c);
        CHECK(tu_rel_err(dw, fd, C) < 1e-6 || C == 1, "dweight rel err %g", tu_rel_err(dw, fd, C));
        tu_fd_grad(fd, c.b, C, ln_loss, &c);
        CHECK(tu_rel_err(db, fd, C) < 1e-6, "dbias rel err %g", tu_rel_err(db, fd, C));
        CHECK(tu_guard_ok(dx, 8 * N * C) && tu_guard_ok(dw, 8 * C) && tu_guard_ok(db, 8 * C), "guards");
        /* frozen parameters: NULL dweight/dbias gives the same dx */
        double *dx2 = malloc(8 * N * C);
        tr_k_layernorm_bwd_f64(dx2, NULL, NULL, c.R, c.x, c.w, c.mean, c.rstd, N, C);
        CHECK(tu_rel_err(dx2, dx, N * C) == 0, "dx differs without dweight/dbias");
        free(dx2); free(fd);
        tu_guarded_free(dx); tu_guarded_free(dw); tu_guarded_free(db);
        free(c.x); free(c.w); free(c.b); free(c.R); free(c.out); free(c.mean); free(c.rstd);
    }
}

static void test_layernorm_f32_matches_f64(void)
{
    int64_t N = 9, C = 768, NC = N * C;
    double *x = malloc(8 * NC), *R = malloc(8 * NC), *out = malloc(8 * NC), *dx = malloc(8 * NC);
    double w[768], b[768], dw[768] = { 0 }, db[768] = { 0 }, mean[9], rstd[9];
    float *xf = malloc(4 * NC), *Rf = malloc(4 * NC), *outf = tu_guarded(4 * NC), *dxf = tu_guarded(4 * NC);
    float wf[768], bf[768], dwf[768] = { 0 }, dbf[768] = { 0 }, meanf[9], rstdf[9];
    tu_seed(12);
    tu_fill(x, NC, 2);
    tu_fill(R, NC, 1);
    tu_fill(w, C, 1);
    tu_fill(b, C, 1);
    tu_to_f32(xf, x, NC); tu_to_f32(Rf, R, NC); tu_to_f32(wf, w, C); tu_to_f32(bf, b, C);
    tr_k_layernorm_fwd_f64(out, mean, rstd, x, w, b, N, C, 1e-12);
    tr_k_layernorm_fwd_f32(outf, meanf, rstdf, xf, wf, bf, N, C, 1e-12f);
    tr_k_layernorm_bwd_f64(dx, dw, db, R, x, w, mean, rstd, N, C);
    tr_k_layernorm_bwd_f32(dxf, dwf, dbf, Rf, xf, wf, meanf, rstdf, N, C);
    CHECK(tu_rel_err_f32(outf, out, NC) < 1e-5, "out %g", tu_rel_err_f32(outf, out, NC));
    CHECK(tu_rel_err_f32(rstdf, rstd, N) < 1e-5, "rstd");
    CHECK(tu_rel_err_f32(dxf, dx, NC) < 1e-5, "dx %g", tu_rel_err_f32(dxf, dx, NC));
    CHECK(tu_rel_err_f32(dwf, dw, C) < 1e-5, "dw %g", tu_rel_err_f32(dwf, dw, C));
    CHECK(tu_rel_err_f32(dbf, db, C) < 1e-5, "db %g", tu_rel_err_f32(dbf, db, C));
    CHECK(tu_guard_ok(outf, 4 * NC) && tu_guard_ok(dxf, 4 * NC), "guards");
    free(x); free(R); free(out); free(dx); free(xf); free(Rf);
    tu_guarded_free(outf); tu_guarded_free(dxf);
}

int main(void)
{
    RUN(test_layernorm_forward_formula);
    RUN(test_layernorm_backward_finite_differences);
    RUN(test_layernorm_f32_matches_f64);
    return check_done();
}
