/* test_elementwise.c — elementwise kernels: mul backward against float64 finite
 * differences (same shape and row-vector broadcast), f32 against f64 for every kernel,
 * guard regions around outputs. */
#include "check.h"
#include "opselem_check.h"

#include "cpu/elementwise.h"

static const int64_t shapes[][2] = { { 1, 1 }, { 3, 5 }, { 4, 7 }, { 1, 9 }, { 6, 1 } };
enum { NSHAPES = 5 };

/* ------------------------------------------------------------ mul backward vs finite differences */

typedef struct {
    double *a, *b, *r, *out;
    int64_t N, C, brows;
} mul_case;

static double mul_loss(void *u)
{
    mul_case *m = u;
    tr_k_mul_fwd_f64(m->out, m->a, m->b, m->N, m->C, m->brows);
    return dot(m->r, m->out, m->N * m->C);
}

static void test_mul_backward_fd(void)
{
    uint64_t s = 1;
    for (int i = 0; i < NSHAPES; i++)
        for (int bc = 0; bc < 2; bc++) {
            int64_t N = shapes[i][0], C = shapes[i][1], brows = bc ? 1 : N, n = N * C, nb = brows * C;
            double *a = malloc(n * 8), *b = malloc(nb * 8), *r = malloc(n * 8), *out = malloc(n * 8);
            double *da = malloc(n * 8), *db = malloc(nb * 8);
            rand_fill(a, n, &s);
            rand_fill(b, nb, &s);
            rand_fill(r, n, &s);
            mul_case m = { a, b, r, out, N, C, brows };
            tr_k_mul_bwd_f64(da, db, r, a, b, N, C, brows);
            fd_check("da", a, n, da, mul_loss, &m);
            fd_check("db", b, nb, db, mul_loss, &m);
            free(a), free(b), free(r), free(out), free(da), free(db);
        }
}

/* ------------------------------------------------------------ f32 against f64, guards */

static void test_f32_matches_f64(void)
{
    uint64_t s = 2;
    for (int i = 0; i < NSHAPES; i++)
        for (int bc = 0; bc < 2; bc++) {
            int64_t N = shapes[i][0], C = shapes[i][1], brows = bc ? 1 : N, n = N * C, nb = brows * C;
            double *a = malloc(n * 8), *b = malloc(nb * 8), *d = malloc(n * 8);
            double *ref = malloc(n * 8), *refb = malloc(nb * 8);
            float *af = malloc(n * 4), *bf = malloc(nb * 4), *df = malloc(n * 4);
            float *o = guard_alloc(n * 4), *ob = guard_alloc(nb * 4);
            rand_fill(a, n, &s), rand_fill(b, nb, &s), rand_fill(d, n, &s);
            to_f32(af, a, n), to_f32(bf, b, nb), to_f32(df, d, n);

            tr_k_add_fwd_f64(ref, a, b, N, C, brows);
            tr_k_add_fwd_f32(o, af, bf, N, C, brows);
            close_f32("add", o, ref, n, 1e-6, 1e-6);
            tr_k_mul_fwd_f64(ref, a, b, N, C, brows);
            tr_k_mul_fwd_f32(o, af, bf, N, C, brows);
            close_f32("mul", o, ref, n, 1e-6, 1e-6);
            tr_k_mul_bwd_f64(ref, refb, d, a, b, N, C, brows);
            tr_k_mul_bwd_f32(o, ob, df, af, bf, N, C, brows);
            close_f32("mul da", o, ref, n, 1e-5, 1e-6);
            close_f32("mul db", ob, refb, nb, 1e-5, 1e-6);
            tr_k_mul_bwd_f32(NULL, ob, df, af, bf, N, C, brows);   /* NULL gradient: skipped */
            close_f32("mul db only", ob, refb, nb, 1e-5, 1e-6);
            tr_k_scale_fwd_f64(ref, a, -0.75, n);
            tr_k_scale_fwd_f32(o, af, -0.75f, n);
            close_f32("scale", o, ref, n, 1e-6, 1e-7);
            to_f32(o, d, n);
            memcpy(ref, d, n * 8);
            tr_k_axpy_fwd_f64(ref, a, 0.5, n);
            tr_k_axpy_fwd_f32(o, af, 0.5f, n);
            close_f32("axpy", o, ref, n, 1e-6, 1e-6);
            tr_k_axpy_fwd_f32(o, af, 0.5f, n);   /* accumulates: a second call adds again */
            tr_k_axpy_fwd_f64(ref, a, 0.5, n);
            close_f32("axpy twice", o, ref, n, 1e-6, 1e-6);
            tr_k_fill_fwd_f64(ref, 3.25, n);
            tr_k_fill_fwd_f32(o, 3.25f, n);
            close_f32("fill", o, ref, n, 0, 0);
            CHECK(guard_intact(o) && guard_intact(ob), "a kernel wrote outside its output (N=%lld C=%lld)",
                  (long long)N, (long long)C);
            free(a), free(b), free(d), free(ref), free(refb), free(af), free(bf), free(df);
            guard_free(o), guard_free(ob);
        }
}

int main(void)
{
    RUN(test_mul_backward_fd);
    RUN(test_f32_matches_f64);
    return check_done();
}
