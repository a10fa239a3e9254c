/* test_embedding.c — embedding kernels: backward (scatter-add with repeated ids and a
 * padding index) against float64 finite differences, f32 against f64, accumulation,
 * guard regions. */
#include "check.h"
#include "opselem_check.h"

#include "cpu/embedding.h"

typedef struct {
    double *table, *r, *out;
    const int64_t *ids;
    int64_t N, C;
} emb_case;

static double emb_loss(void *u)
{
    emb_case *e = u;
    tr_k_embedding_fwd_f64(e->out, e->ids, e->table, e->N, e->C);
    return dot(e->r, e->out, e->N * e->C);
}

/* With padding_idx the loss that the analytic gradient matches is the one whose padding
 * rows do not depend on the table: zero r on those rows. */
static void test_backward_fd(void)
{
    uint64_t s = 3;
    const int64_t ids[] = { 2, 0, 2, 4, 1, 2, 3 };
    const int64_t shapes[][2] = { { 1, 1 }, { 7, 3 }, { 5, 1 }, { 7, 70 } };
    for (int i = 0; i < 4; i++)
        for (int64_t pad = -1; pad <= 2; pad += 3) {
            int64_t N = shapes[i][0], C = shapes[i][1], V = 5;
            double *table = malloc(V * C * 8), *r = malloc(N * C * 8), *out = malloc(N * C * 8);
            double *dtable = calloc(V * C, 8);
            rand_fill(table, V * C, &s);
            rand_fill(r, N * C, &s);
            for (int64_t n = 0; n < N; n++)
                if (ids[n] == pad) memset(r + n * C, 0, C * 8);
            emb_case e = { table, r, out, ids, N, C };
            tr_k_embedding_bwd_f64(dtable, r, ids, N, C, pad);
            fd_check("dtable", table, V * C, dtable, emb_loss, &e);
            if (pad >= 0) {
                /* the padding row gets nothing even where dout is non-zero */
                rand_fill(r, N * C, &s);
                memset(dtable, 0, V * C * 8);
                tr_k_embedding_bwd_f64(dtable, r, ids, N, C, pad);
                for (int64_t c = 0; c < C; c++) CHECK(dtable[pad * C + c] == 0, "padding row got a gradient");
            }
            free(table), free(r), free(out), free(dtable);
        }
}

static void test_f32_matches_f64(void)
{
    uint64_t s = 4;
    int64_t N = 9, C = 133, V = 6;
    int64_t ids[9] = { 5, 0, 0, 3, 5, 5, 1, 2, 0 };
    double *table = malloc(V * C * 8), *d = malloc(N * C * 8), *ref = malloc(N * C * 8);
    double *dref = malloc(V * C * 8);
    float *tf = malloc(V * C * 4), *df = malloc(N * C * 4), *o = guard_alloc(N * C * 4);
    float *dt = guard_alloc(V * C * 4);
    rand_fill(table, V * C, &s), rand_fill(d, N * C, &s), rand_fill(dref, V * C, &s);
    to_f32(tf, table, V * C), to_f32(df, d, N * C), to_f32(dt, dref, V * C);
    tr_k_embedding_fwd_f64(ref, ids, table, N, C);
    tr_k_embedding_fwd_f32(o, ids, tf, N, C);
    close_f32("forward", o, ref, N * C, 0, 1e-7);
    tr_k_embedding_bwd_f64(dref, d, ids, N, C, -1);   /* accumulates onto the random start */
    tr_k_embedding_bwd_f32(dt, df, ids, N, C, -1);
    close_f32("dtable", dt, dref, V * C, 1e-6, 1e-6);
    CHECK(guard_intact(o) && guard_intact(dt), "a kernel wrote outside its output");
    free(table), free(d), free(ref), free(dref), free(tf), free(df);
    guard_free(o), guard_free(dt);
}

int main(void)
{
    RUN(test_backward_fd);
    RUN(test_f32_matches_f64);
    return check_done();
}
