/* test_dropout.c — the dropout kernel: backward (the same kernel on dout with the same
 * mask) against float64 finite differences, f32 against f64, guard regions. */
#include "check.h"
#include "opselem_check.h"

#include "cpu/dropout.h"

typedef struct {
    double *x, *r, *out;
    const uint8_t *keep;
    int64_t n;
} drop_case;

static double drop_loss(void *u)
{
    drop_case *d = u;
    tr_k_dropout_fwd_f64(d->out, d->x, d->keep, 1 / (1 - 0.3), d->n);
    return dot(d->r, d->out, d->n);
}

static void test_backward_fd_and_f32(void)
{
    uint64_t s = 5;
    const int64_t sizes[] = { 1, 7, 64 };
    for (int i = 0; i < 3; i++) {
        int64_t n = sizes[i];
        double *x = malloc(n * 8), *r = malloc(n * 8), *out = malloc(n * 8), *dx = malloc(n * 8);
        uint8_t *keep = malloc(n);
        float *xf = malloc(n * 4), *of = guard_alloc(n * 4);
        rand_fill(x, n, &s), rand_fill(r, n, &s);
        for (int64_t j = 0; j < n; j++) keep[j] = urand(&s) > -0.4;
        drop_case d = { x, r, out, keep, n };
        tr_k_dropout_fwd_f64(dx, r, keep, 1 / (1 - 0.3), n);
        fd_check("dx", x, n, dx, drop_loss, &d);
        to_f32(xf, x, n);
        tr_k_dropout_fwd_f64(out, x, keep, 1 / (1 - 0.3), n);
        tr_k_dropout_fwd_f32(of, xf, keep, 1 / (1 - 0.3f), n);
        close_f32("forward", of, out, n, 1e-6, 1e-7);
        for (int64_t j = 0; j < n; j++) CHECK(keep[j] || of[j] == 0, "dropped element %lld is not 0", (long long)j);
        CHECK(guard_intact(of), "dropout wrote outside its output");
        free(x), free(r), free(out), free(dx), free(keep), free(xf), guard_free(of);
    }
}

int main(void)
{
    RUN(test_backward_fd_and_f32);
    return check_done();
}
