/* test_matmul.c — the matmul kernels (kernels/cpu/matmul.c): f64 against a naive triple
 * loop for every transpose/bias/beta/batch combination, f32 against f64, guard regions
 * (Linear's backward against finite differences: test_ops_table.c), and
 * argument checks that stop BLAS from seeing bad arguments. */
#include "check.h"
#include "op_check.h"
#include "cpu/matmul.h"

#include <string.h>

/* ------------------------------------------------------------ reference */

static void naive_matmul(double *C, const double *A, const double *B, const double *bias,
                         int M, int N, int K, int tA, int tB, double alpha, double beta)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++) {
                double a = tA ? A[p * M + i] : A[i * K + p];
                double b = tB ? B[j * K + p] : B[p * N + j];
                s += a * b;
            }
            C[i * N + j] = alpha * s + (beta == 0 ? 0 : beta * C[i * N + j]) + (bias ? bias[j] : 0);
        }
}

/* ------------------------------------------------------------ cases */

static void test_matmul_against_naive(void)
{
    static const int shapes[][3] = { { 1, 1, 1 }, { 3, 5, 7 }, { 17, 1, 9 }, { 4, 6, 1 }, { 33, 31, 29 } };
    oc_seed(1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                for (int variant = 0; variant < 4; variant++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], batch = 3;
                    int use_bias = variant & 1;
                    double beta = (variant & 2) ? 0.5 : 0.0, alpha = 1.25;
                    double *A = malloc(sizeof(double) * batch * M * K);
                    double *B = malloc(sizeof(double) * batch * K * N);
                    double *bias = malloc(sizeof(double) * N);
                    double *C = oc_guarded(sizeof(double) * batch * M * N);
                    double *R = malloc(sizeof(double) * batch * M * N);
                    float *Af = malloc(sizeof(float) * batch * M * K);
                    float *Bf = malloc(sizeof(float) * batch * K * N);
                    float *biasf = malloc(sizeof(float) * N);
                    float *Cf = oc_guarded(sizeof(float) * batch * M * N);
                    oc_fill(A, (int64_t)batch * M * K, 1);
                    oc_fill(B, (int64_t)batch * K * N, 1);
                    oc_fill(bias, N, 1);
                    oc_fill(C, (int64_t)batch * M * N, 1);
                    memcpy(R, C, sizeof(double) * batch * M * N);
                    oc_to_f32(Af, A, (int64_t)batch * M * K);
                    oc_to_f32(Bf, B, (int64_t)batch * K * N);
                    oc_to_f32(biasf, bias, N);
                    oc_to_f32(Cf, C, (int64_t)batch * M * N);
                    for (int b = 0; b < batch; b++)
                        naive_matmul(R + b * M * N, A + b * M * K, B + b * K * N,
                                     use_bias ? bias : NULL, M, N, K, tA, tB, alpha, beta);
                    tr_error err;
                    tr_error_clear(&err);
                    int rc = tr_k_matmul_fwd_f64(C, A, B, use_bias ? bias : NULL, batch, M, N, K, tA, tB,
                                           alpha, beta, (int64_t)M * K, (int64_t)K * N,
                                           (int64_t)M * N, &err);
                    CHECK(rc == TR_OK, "f64 rc %d: %s", rc, err.msg);
                    double e = oc_rel_err(C, R, (int64_t)batch * M * N);
                    CHECK(e < 1e-12, "f64 M%d N%d K%d tA%d tB%d v%d: rel err %g", M, N, K, tA, tB,
                          variant, e);
                    rc = tr_k_matmul_fwd_f32(Cf, Af, Bf, use_bias ? biasf : NULL, batch, M, N, K, tA, tB,
                                       (float)alpha, (float)beta, (int64_t)M * K, (int64_t)K * N,
                                       (int64_t)M * N, &err);
                    CHECK(rc == TR_OK, "f32 rc %d: %s", rc, err.msg);
                    e = oc_rel_err_f32(Cf, R, (int64_t)batch * M * N);
                    CHECK(e < 1e-5, "f32 M%d N%d K%d tA%d tB%d v%d: rel err %g", M, N, K, tA, tB,
                          variant, e);
                    CHECK(oc_guard_ok(C), "f64 guard overwritten");
                    CHECK(oc_guard_ok(Cf), "f32 guard overwritten");
                    free(A); free(B); free(bias); free(R); free(Af); free(Bf); free(biasf);
                    oc_guarded_free(C); oc_guarded_free(Cf);
                }
}

static void test_matmul_beta0_ignores_garbage_and_broadcasts(void)
{
    int M = 5, N = 4, K = 3, batch = 2;
    double A[2 * 5 * 3], B[3 * 4], C[2 * 5 * 4], R[5 * 4];
    oc_seed(2);
    oc_fill(A, 2 * M * K, 1);
    oc_fill(B, K * N, 1);
    for (int i = 0; i < batch * M * N; i++) C[i] = NAN;
    tr_error err;
    int rc = tr_k_matmul_fwd_f64(C, A, B, NULL, batch, M, N, K, 0, 0, 1, 0, M * K, 0, M * N, &err);
    CHECK(rc == TR_OK, "rc %d", rc);
    for (int b = 0; b < batch; b++) {
        naive_matmul(R, A + b * M * K, B, NULL, M, N, K, 0, 0, 1, 0);
        CHECK(oc_rel_err(C + b * M * N, R, M * N) < 1e-12, "batch %d with stride-0 B", b);
    }
}

static void test_matmul_empty_k_gives_beta_c_plus_bias(void)
{
    double C[6] = { 1, 2, 3, 4, 5, 6 }, bias[3] = { 10, 20, 30 };
    tr_error err;
    int rc = tr_k_matmul_fwd_f64(C, NULL, NULL, bias, 1, 2, 3, 0, 0, 0, 1, 2, 0, 0, 0, &err);
    CHECK(rc == TR_OK, "rc %d: %s", rc, err.msg);
    CHECK(C[0] == 12 && C[5] == 42, "C = 2C + bias: %g %g", C[0], C[5]);
}

static void test_matmul_rejects_bad_arguments(void)
{
    float C[4], A[4], B[4];
    tr_error err;
    tr_error_clear(&err);
    int rc = tr_k_matmul_fwd_f32(C, A, B, NULL, 1, -2, 2, 2, 0, 0, 1, 0, 4, 4, 4, &err);
    CHECK(rc == TR_EINTERNAL, "negative M accepted: rc %d", rc);
    CHECK(strstr(err.msg, "matmul") != NULL, "message names the file: %s", err.msg);
    rc = tr_k_matmul_fwd_f32(C, A, B, NULL, 1, 2, 2, 2, 0, 0, 1, 0, -1, 4, 4, &err);
    CHECK(rc == TR_EINTERNAL, "negative stride accepted: rc %d", rc);
}

/* ------------------------------------------------------------ linear backward vs FD */

/* The bias gradient accumulates column sums (+=) over more rows than one BLAS block holds
 * (2500 rows: blocks of 1024, 1024 and 452). */
static void test_bias_backward_accumulates_column_sums(void)
{
    enum { N = 2500, O = 37 };
    float *dout = malloc(sizeof(float) * N * O), dbias[O];
    CHECK(dout != NULL, "buffer");
    for (int i = 0; i < N * O; i++) dout[i] = (float)((i * 31) % 17 - 8);
    for (int o = 0; o < O; o++) dbias[o] = (float)o;
    tr_k_bias_bwd_f32(dbias, dout, N, O);
    for (int o = 0; o < O; o++) {
        double want = o;
        for (int n = 0; n < N; n++) want += dout[n * O + o];
        CHECK(dbias[o] == (float)want, "column %d: %g, want %g", o, dbias[o], want);
    }
    float kept[O];
    memcpy(kept, dbias, sizeof kept);
    tr_k_bias_bwd_f32(dbias, dout, 0, O);   /* no rows: nothing changes */
    CHECK(memcmp(kept, dbias, sizeof kept) == 0, "no rows changed dbias");
    free(dout);
}

int main(void)
{
    RUN(test_bias_backward_accumulates_column_sums);
    RUN(test_matmul_against_naive);
    RUN(test_matmul_beta0_ignores_garbage_and_broadcasts);
    RUN(test_matmul_empty_k_gives_beta_c_plus_bias);
    RUN(test_matmul_rejects_bad_arguments);
    return check_done();
}
