/* test_similarity.c — L2 normalisation and cosine-similarity kernels: backward against
 * float64 finite differences (including a row below eps), values against a direct
 * computation, f32 against f64, guard regions. */
#include "check.h"
#include "opselem_check.h"

#include "cpu/similarity.h"

typedef struct {
    double *x, *r, *out;
    int64_t N, C;
    double eps;
} norm_case;

static double norm_loss(void *u)
{
    norm_case *c = u;
    tr_k_l2norm_fwd_f64(c->out, c->x, c->N, c->C, c->eps);
    return dot(c->r, c->out, c->N * c->C);
}

static void test_l2norm_fd(void)
{
    uint64_t s = 10;
    const int64_t shapes[][2] = { { 1, 1 }, { 3, 5 }, { 4, 1 }, { 2, 9 } };
    for (int i = 0; i < 4; i++) {
        int64_t N = shapes[i][0], C = shapes[i][1], n = N * C;
        double *x = malloc(n * 8), *r = malloc(n * 8), *out = malloc(n * 8), *dx = malloc(n * 8);
        rand_fill(x, n, &s), rand_fill(r, n, &s);
        norm_case c = { x, r, out, N, C, 1e-12 };
        tr_k_l2norm_bwd_f64(dx, r, x, N, C, 1e-12);
        fd_check("dx", x, n, dx, norm_loss, &c);
        /* a row whose norm is below eps is divided by eps: linear, gradient dout/eps */
        for (int64_t q = 0; q < C; q++) x[q] *= 1e-3;
        c.eps = 0.5;
        tr_k_l2norm_bwd_f64(dx, r, x, N, C, 0.5);
        fd_check("dx (eps)", x, n, dx, norm_loss, &c);
        free(x), free(r), free(out), free(dx);
    }
}

typedef struct {
    double *a, *b, *r, *an, *bn, *sim;
    int64_t N, M, C;
} sim_case;

static double sim_loss(void *u)
{
    sim_case *c = u;
    tr_k_l2norm_fwd_f64(c->an, c->a, c->N, c->C, 1e-12);
    tr_k_l2norm_fwd_f64(c->bn, c->b, c->M, c->C, 1e-12);
    tr_k_cosine_sim_fwd_f64(c->sim, c->an, c->bn, c->N, c->M, c->C);
    return dot(c->r, c->sim, c->N * c->M);
}

static void test_cosine_sim_fd(void)
{
    uint64_t s = 11;
    const int64_t shapes[][3] = { { 1, 1, 1 }, { 3, 4, 5 }, { 2, 1, 7 }, { 5, 5, 3 } };
    for (int i = 0; i < 4; i++) {
        int64_t N = shapes[i][0], M = shapes[i][1], C = shapes[i][2];
        double *a = malloc(N * C * 8), *b = malloc(M * C * 8), *r = malloc(N * M * 8), *sim = malloc(N * M * 8);
        double *an = malloc(N * C * 8), *bn = malloc(M * C * 8), *dan = malloc(N * C * 8), *dbn = malloc(M * C * 8);
        double *da = malloc(N * C * 8), *db = malloc(M * C * 8);
        rand_fill(a, N * C, &s), rand_fill(b, M * C, &s), rand_fill(r, N * M, &s);
        sim_case c = { a, b, r, an, bn, sim, N, M, C };
        sim_loss(&c);
        for (int64_t q = 0; q < N * M; q++) CHECK(fabs(sim[q]) <= 1 + 1e-12, "cosine %g outside [-1, 1]", sim[q]);
        tr_k_cosine_sim_bwd_f64(dan, dbn, r, an, bn, N, M, C);
        tr_k_l2norm_bwd_f64(da, dan, a, N, C, 1e-12);
        tr_k_l2norm_bwd_f64(db, dbn, b, M, C, 1e-12);
        fd_check("da", a, N * C, da, sim_loss, &c);
        fd_check("db", b, M * C, db, sim_loss, &c);
        free(a), free(b), free(r), free(sim), free(an), free(bn), free(dan), free(dbn), free(da), free(db);
    }
}

static void test_f32_matches_f64(void)
{
    uint64_t s = 12;
    int64_t N = 5, M = 3, C = 17;
    double *a = malloc(N * C * 8), *b = malloc(M * C * 8), *d = malloc(N * M * 8);
    double *an = malloc(N * C * 8), *bn = malloc(M * C * 8), *sim = malloc(N * M * 8);
    double *dan = malloc(N * C * 8), *dbn = malloc(M * C * 8);
    float *af = malloc(N * C * 4), *bf = malloc(M * C * 4), *df = malloc(N * M * 4);
    float *anf = guard_alloc(N * C * 4), *bnf = guard_alloc(M * C * 4), *simf = guard_alloc(N * M * 4);
    float *danf = guard_alloc(N * C * 4), *dbnf = guard_alloc(M * C * 4);
    rand_fill(a, N * C, &s), rand_fill(b, M * C, &s), rand_fill(d, N * M, &s);
    to_f32(af, a, N * C), to_f32(bf, b, M * C), to_f32(df, d, N * M);
    tr_k_l2norm_fwd_f64(an, a, N, C, 1e-12);
    tr_k_l2norm_fwd_f64(bn, b, M, C, 1e-12);
    tr_k_l2norm_fwd_f32(anf, af, N, C, 1e-12f);
    tr_k_l2norm_fwd_f32(bnf, bf, M, C, 1e-12f);
    close_f32("an", anf, an, N * C, 1e-5, 1e-7);
    tr_k_cosine_sim_fwd_f64(sim, an, bn, N, M, C);
    tr_k_cosine_sim_fwd_f32(simf, anf, bnf, N, M, C);
    close_f32("sim", simf, sim, N * M, 1e-5, 1e-6);
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++) {
            double ab = dot(a + i * C, b + j * C, C), aa = dot(a + i * C, a + i * C, C);
            double bb = dot(b + j * C, b + j * C, C);
            CHECK_CLOSE(sim[i * M + j], ab / sqrt(aa * bb), 1e-12, 1e-12);
        }
    tr_k_cosine_sim_bwd_f64(dan, dbn, d, an, bn, N, M, C);
    tr_k_cosine_sim_bwd_f32(danf, dbnf, df, anf, bnf, N, M, C);
    close_f32("dan", danf, dan, N * C, 1e-5, 1e-6);
    close_f32("dbn", dbnf, dbn, M * C, 1e-5, 1e-6);
    tr_k_l2norm_bwd_f64(dan, dan, a, N, C, 1e-12);   /* in place: dx may alias dout */
    tr_k_l2norm_bwd_f32(danf, danf, af, N, C, 1e-12f);
    close_f32("da", danf, dan, N * C, 1e-5, 1e-6);
    CHECK(guard_intact(anf) && guard_intact(bnf) && guard_intact(simf) && guard_intact(danf) && guard_intact(dbnf),
          "a kernel wrote outside its output");
    free(a), free(b), free(d), free(an), free(bn), free(sim), free(dan), free(dbn), free(af), free(bf), free(df);
    guard_free(anf), guard_free(bnf), guard_free(simf), guard_free(danf), guard_free(dbnf);
}

int main(void)
{
    RUN(test_l2norm_fd);
    RUN(test_cosine_sim_fd);
    RUN(test_f32_matches_f64);
    return check_done();
}
