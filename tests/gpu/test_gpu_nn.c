/* test_gpu_nn.c — every CUDA kernel of the kernels/cuda/ families against the CPU kernels'
 * float64 reference (the _f64 kernels of kernels/cpu) on the same inputs, on a real GPU, for f32, bf16
 * and f16 storage, odd sizes, size 1 and masks; the dropout masks bit for bit against
 * core/base/rng.c. Built and run by tests/gpu/run.sh like test_gpu_parity.c; without a GPU it
 * prints SKIP and exits 0.
 *
 * Inputs are random, rounded to the storage dtype first, so that the GPU and the reference
 * see the same numbers. Every output sits between guard bytes and is poisoned (all bits
 * set: NaN in every float dtype) before the kernel runs, so an element it fails to write
 * shows as NaN. Agreement is the normalised mean-square error
 *   nmse = sum (got - ref)^2 / max(sum ref^2, n * 1e-2)
 * (the floor, a root-mean-square of a tenth of the unit-scale inputs, judges an output that
 * is zero in exact arithmetic, such as attention's dq over one key or l2norm's dx over one
 * column, by its absolute error: its own size is rounding noise)
 * against a bound per output dtype: f32 1e-9 (fp32 arithmetic), f16 1e-5, bf16 1e-4 (one
 * rounding of the output plus half inputs), as ggml's test-backend-ops; and no NaN where the
 * reference has none. Each case prints its worst nmse. */
#include "cuda/activation.h"
#include "cuda/attention.h"
#include "cuda/dropout.h"
#include "cuda/embedding.h"
#include "cuda/pair_features.h"
#include "cuda/layernorm.h"
#include "cuda/loss.h"
#include "cuda/optim.h"
#include "cuda/pooling.h"
#include "cuda/reduce.h"
#include "cuda/similarity.h"
#include "cuda/softmax.h"
#include "gpu_testutil.h"

#include "cpu/attention.h"
#include "cpu/embedding.h"
#include "cpu/pair_features.h"
#include "cpu/activation.h"
#include "cpu/layernorm.h"
#include "cpu/loss.h"
#include "cpu/optim.h"
#include "cpu/pooling.h"
#include "cpu/reduce.h"
#include "cpu/similarity.h"
#include "cpu/softmax.h"
#include "rng.h"

static const int float_dtypes[] = { TR_F32, TR_BF16, TR_F16 };
static const char *dt_name(int dt) { return dt == TR_F32 ? "f32" : dt == TR_BF16 ? "bf16" : "f16"; }
static double worst_nmse;

/* ------------------------------------------------------------ typed device arrays */

/* A device array of n elements of dtype dt (a float dtype, or TR_I32 / TR_I64 / bytes for
 * dt = -1), in a guarded buffer. */
typedef struct darr {
    gbuf g;
    int dt;
    size_t n, esize;
} darr;

static size_t esize_of(int dt) { return dt < 0 ? 1 : tr_dtype_size(dt); }

static int darr_new(darr *d, size_t n, int dt)
{
    d->dt = dt;
    d->n = n;
    d->esize = esize_of(dt);
    return gbuf_new(&d->g, (n ? n : 1) * d->esize, 0);
}

/* Poison: all bits set, a NaN in f32, bf16 and f16. */
static void darr_poison(darr *d) { TCUDA(cudaMemsetAsync(d->g.data, 0xff, d->n * d->esize, dev_stream)); }

/* Upload float values rounded to d's dtype; `vals` is updated to the rounded values. */
static void darr_put(darr *d, float *vals)
{
    void *h = malloc(d->n * d->esize + 1);
    for (size_t i = 0; i < d->n; i++) {
        set_f(h, d->dt, i, vals[i]);
        vals[i] = get_f(h, d->dt, i);
    }
    h2d(&d->g, h, d->n * d->esize);
    free(h);
}

static void darr_put_raw(darr *d, const void *h) { h2d(&d->g, h, d->n * d->esize); }

static void darr_get(float *vals, const darr *d)
{
    void *h = malloc(d->n * d->esize + 1);
    d2h(h, &d->g, d->n * d->esize);
    for (size_t i = 0; i < d->n; i++) vals[i] = get_f(h, d->dt, i);
    free(h);
}

static void darr_free(darr *d) { gbuf_free(&d->g); }

/* n random values in [-amp, amp) rounded to dt (as floats), and their float64 copy. */
static float *rnd_vals(size_t n, float amp, int dt, double **as_f64)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    uint16_t h;
    for (size_t i = 0; i < n; i++) {
        float x = amp * rnd_unit();
        set_f(&h, dt == TR_F32 ? TR_BF16 : dt, 0, x); /* round through the dtype when half */
        v[i] = dt == TR_F32 ? x : get_f(&h, dt, 0);
    }
    if (as_f64) {
        *as_f64 = malloc((n ? n : 1) * sizeof **as_f64);
        for (size_t i = 0; i < n; i++) (*as_f64)[i] = v[i];
    }
    return v;
}

static double *f64_copy(const float *v, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

static double nmse_bound(int dt) { return dt == TR_F32 ? 1e-9 : dt == TR_F16 ? 1e-5 : 1e-4; }

/* Compares d (read back) with ref; `what` names the output in the message. */
static void expect_close(const char *what, const darr *d, const double *ref, double bound)
{
    float *got = malloc((d->n ? d->n : 1) * sizeof *got);
    darr_get(got, d);
    double num = 0, den = 0;
    size_t nan_at = (size_t)-1;
    for (size_t i = 0; i < d->n; i++) {
        if (isnan(got[i]) && !isnan(ref[i])) {
            if (nan_at == (size_t)-1) nan_at = i;
            continue;
        }
        if (isnan(ref[i]) || isinf(ref[i])) continue;
        double e = (double)got[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    const double floor = (double)d->n * 1e-2;
    double nmse = d->n ? num / (den > floor ? den : floor) : 0;
    if (nmse > worst_nmse) worst_nmse = nmse;
    CHECK(nan_at == (size_t)-1, "%s: NaN at %zu of %zu (reference %g): an element not written?", what, nan_at, d->n,
          nan_at == (size_t)-1 ? 0.0 : ref[nan_at]);
    CHECK(nmse <= bound, "%s: nmse %.3g > %.3g (%s, n %zu)", what, nmse, bound, d->dt >= 0 ? dt_name(d->dt) : "-",
          d->n);
    CHECK(gbuf_guards_ok(&d->g), "%s: a guard byte was overwritten", what);
    free(got);
}

static void sync_ok(const char *what)
{
    cudaError_t e = cudaStreamSynchronize(dev_stream);
    CHECK(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
}

#define KCALL(what, call)                                                                    \
    do {                                                                                     \
        tr_error err_;                                                                       \
        int rc_ = (call);                                                                    \
        (void)err_;                                                                          \
        CHECK(rc_ == TR_OK, "%s: %s", what, err_.msg);                                       \
    } while (0)
#define ERR (&err_)

/* ------------------------------------------------------------ layer norm */

static void layernorm_case(int dt, int64_t N, int64_t C)
{
    size_t nx = (size_t)(N * C);
    double *x64, *w64, *b64, *g64;
    float *x = rnd_vals(nx, 2.0f, dt, &x64), *w = rnd_vals((size_t)C, 1.0f, dt, &w64);
    float *b = rnd_vals((size_t)C, 1.0f, dt, &b64), *g = rnd_vals(nx, 1.0f, dt, &g64);
    darr dx_, dw_, db_, dout, dmean, drstd, ddx, ddw, ddb, dscr;
    darr_new(&dx_, nx, dt), darr_new(&dw_, (size_t)C, dt), darr_new(&db_, (size_t)C, dt), darr_new(&dout, nx, dt);
    darr_new(&dmean, (size_t)N, TR_F32), darr_new(&drstd, (size_t)N, TR_F32);
    darr_put(&dx_, x), darr_put(&dw_, w), darr_put(&db_, b), darr_poison(&dout);
    darr_poison(&dmean), darr_poison(&drstd);
    KCALL("layernorm", tr_k_layernorm_fwd_cuda(dout.g.data, dt, dmean.g.data, drstd.g.data, dx_.g.data, dt,
                                               dw_.g.data, db_.g.data, dt, N, C, 1e-5f, dev_stream, ERR));
    sync_ok("layernorm");
    double *ro = malloc(nx * 8), *rm = malloc((size_t)N * 8), *rr = malloc((size_t)N * 8);
    tr_k_layernorm_fwd_f64(ro, rm, rr, x64, w64, b64, N, C, 1e-5);
    expect_close("layernorm.out", &dout, ro, nmse_bound(dt));
    expect_close("layernorm.mean", &dmean, rm, 1e-10);
    expect_close("layernorm.rstd", &drstd, rr, 1e-10);
    /* backward: dweight/dbias accumulate onto a nonzero start */
    float *w0 = rnd_vals((size_t)C, 1.0f, TR_F32, NULL), *b0 = rnd_vals((size_t)C, 1.0f, TR_F32, NULL);
    double *rdx = malloc(nx * 8), *rdw = f64_copy(w0, (size_t)C), *rdb = f64_copy(b0, (size_t)C);
    darr dg;
    darr_new(&dg, nx, dt), darr_put(&dg, g);
    darr_new(&ddx, nx, dt), darr_new(&ddw, (size_t)C, TR_F32), darr_new(&ddb, (size_t)C, TR_F32);
    darr_poison(&ddx), darr_put(&ddw, w0), darr_put(&ddb, b0);
    int64_t ns = tr_k_layernorm_bwd_scratch_cuda(N, C);
    darr_new(&dscr, (size_t)ns, TR_F32);
    KCALL("layernorm_backward",
          tr_k_layernorm_bwd_cuda(ddx.g.data, dt, ddw.g.data, ddb.g.data, dg.g.data, dt, dx_.g.data, dt, dw_.g.data,
                                  dt, dmean.g.data, drstd.g.data, N, C, dscr.g.data, dev_stream, ERR));
    sync_ok("layernorm_backward");
    tr_k_layernorm_bwd_f64(rdx, rdw, rdb, g64, x64, w64, rm, rr, N, C);
    expect_close("layernorm.dx", &ddx, rdx, nmse_bound(dt));
    expect_close("layernorm.dweight (+=)", &ddw, rdw, 1e-8);
    expect_close("layernorm.dbias (+=)", &ddb, rdb, 1e-8);
    darr *all[] = { &dx_, &dw_, &db_, &dout, &dmean, &drstd, &ddx, &ddw, &ddb, &dscr, &dg };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) darr_free(all[i]);
    free(x), free(w), free(b), free(g), free(w0), free(b0), free(x64), free(w64), free(b64), free(g64);
    free(ro), free(rm), free(rr), free(rdx), free(rdw), free(rdb);
}

static void test_layernorm(void)
{
    static const int64_t shapes[][2] = { { 1, 1 }, { 1, 7 }, { 5, 33 }, { 64, 768 }, { 300, 1024 }, { 513, 97 } };
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            layernorm_case(float_dtypes[d], shapes[s][0], shapes[s][1]);
}

/* ------------------------------------------------------------ elementwise activations */

static void test_gelu_tanh(void)
{
    static const int64_t sizes[] = { 1, 3, 1000, 65537 };
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < 4; s++) {
            int dt = float_dtypes[d];
            size_t n = (size_t)sizes[s];
            double *x64, *g64;
            float *x = rnd_vals(n, 4.0f, dt, &x64), *g = rnd_vals(n, 1.0f, dt, &g64);
            darr dx, dg, dout;
            darr_new(&dx, n, dt), darr_new(&dg, n, dt), darr_new(&dout, n, dt);
            darr_put(&dx, x), darr_put(&dg, g);
            double *ref = malloc(n * 8);
            for (int approx = 0; approx < 2; approx++) {
                darr_poison(&dout);
                KCALL("gelu", tr_k_gelu_fwd_cuda(dout.g.data, dt, dx.g.data, dt, (int64_t)n, approx, dev_stream, ERR));
                tr_k_gelu_fwd_f64(ref, x64, (int64_t)n, approx);
                expect_close(approx ? "gelu_tanh" : "gelu_erf", &dout, ref, nmse_bound(dt));
                darr_poison(&dout);
                KCALL("gelu_backward", tr_k_gelu_bwd_cuda(dout.g.data, dt, dg.g.data, dt, dx.g.data, dt, (int64_t)n,
                                                          approx, dev_stream, ERR));
                tr_k_gelu_bwd_f64(ref, g64, x64, (int64_t)n, approx);
                expect_close(approx ? "gelu_tanh.dx" : "gelu_erf.dx", &dout, ref, nmse_bound(dt));
            }
            darr_poison(&dout);
            KCALL("tanh", tr_k_tanh_fwd_cuda(dout.g.data, dt, dx.g.data, dt, (int64_t)n, dev_stream, ERR));
            tr_k_tanh_fwd_f64(ref, x64, (int64_t)n);
            expect_close("tanh", &dout, ref, nmse_bound(dt));
            /* tanh backward from the forward's output y (the reference's y: the GPU's, read back) */
            float *y = malloc(n * sizeof *y);
            darr_get(y, &dout);
            double *y64 = f64_copy(y, n);
            darr dy;
            darr_new(&dy, n, dt), darr_put(&dy, y), darr_poison(&dout);
            KCALL("tanh_backward", tr_k_tanh_bwd_cuda(dout.g.data, dt, dg.g.data, dt, dy.g.data, dt, (int64_t)n,
                                                      dev_stream, ERR));
            tr_k_tanh_bwd_f64(ref, g64, y64, (int64_t)n);
            expect_close("tanh.dx", &dout, ref, nmse_bound(dt));
            darr_free(&dx), darr_free(&dg), darr_free(&dout), darr_free(&dy);
            free(x), free(g), free(y), free(x64), free(g64), free(y64), free(ref);
        }
}

/* ------------------------------------------------------------ softmax, l2norm */

static void test_softmax_l2norm(void)
{
    static const int64_t shapes[][2] = { { 1, 1 }, { 3, 5 }, { 64, 512 }, { 7, 2049 } };
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < 4; s++) {
            int dt = float_dtypes[d];
            int64_t N = shapes[s][0], C = shapes[s][1];
            size_t n = (size_t)(N * C);
            double *x64, *g64;
            float *x = rnd_vals(n, 6.0f, dt, &x64), *g = rnd_vals(n, 1.0f, dt, &g64);
            darr dx, dg, dout, dy;
            darr_new(&dx, n, dt), darr_new(&dg, n, dt), darr_new(&dout, n, dt), darr_new(&dy, n, dt);
            darr_put(&dx, x), darr_put(&dg, g), darr_poison(&dout);
            double *ref = malloc(n * 8), *y64 = malloc(n * 8);
            KCALL("softmax", tr_k_softmax_fwd_cuda(dout.g.data, dt, dx.g.data, dt, N, C, dev_stream, ERR));
            tr_k_softmax_fwd_f64(y64, x64, N, C);
            expect_close("softmax", &dout, y64, nmse_bound(dt));
            float *y = malloc(n * sizeof *y);
            darr_get(y, &dout);
            double *yg = f64_copy(y, n);
            darr_put(&dy, y), darr_poison(&dout);
            KCALL("softmax_backward",
                  tr_k_softmax_bwd_cuda(dout.g.data, dt, dg.g.data, dt, dy.g.data, dt, N, C, dev_stream, ERR));
            tr_k_softmax_bwd_f64(ref, g64, yg, N, C);
            expect_close("softmax.dx", &dout, ref, nmse_bound(dt));
            darr_poison(&dout);
            KCALL("l2norm", tr_k_l2norm_fwd_cuda(dout.g.data, dt, dx.g.data, dt, N, C, 1e-12f, dev_stream, ERR));
            tr_k_l2norm_fwd_f64(ref, x64, N, C, 1e-12);
            expect_close("l2norm", &dout, ref, nmse_bound(dt));
            darr_poison(&dout);
            KCALL("l2norm_backward", tr_k_l2norm_bwd_cuda(dout.g.data, dt, dg.g.data, dt, dx.g.data, dt, N, C, 1e-12f,
                                                          dev_stream, ERR));
            tr_k_l2norm_bwd_f64(ref, g64, x64, N, C, 1e-12);
            expect_close("l2norm.dx", &dout, ref, nmse_bound(dt));
            darr_free(&dx), darr_free(&dg), darr_free(&dout), darr_free(&dy);
            free(x), free(g), free(y), free(x64), free(g64), free(ref), free(y64), free(yg);
        }
}

/* ------------------------------------------------------------ dropout */

static void test_dropout_bits(void)
{
    static const uint64_t offsets[] = { 0, 1, 3, 4, 1000003 };
    static const int64_t sizes[] = { 1, 2, 5, 4099, 300001 };
    static const float ps[] = { 0.0f, 0.1f, 0.5f, 0.9f, 1.0f };
    tr_rng_key key = { 0x123456789abcdefull, 7, 3, 2 };
    for (size_t o = 0; o < 5; o++)
        for (size_t s = 0; s < 5; s++)
            for (size_t pi = 0; pi < 5; pi++) {
                size_t n = (size_t)sizes[s];
                uint8_t *want = malloc(n), *got = malloc(n);
                tr_dropout_mask_bits(want, n, ps[pi], key, offsets[o]);
                darr dk;
                darr_new(&dk, n, -1), darr_poison(&dk);
                KCALL("dropout_mask", tr_k_dropout_mask_cuda(dk.g.data, (int64_t)n, ps[pi], key.seed, key.step,
                                                             key.layer, key.op, offsets[o], dev_stream, ERR));
                d2h(got, &dk.g, n);
                size_t diff = 0, first = 0;
                for (size_t i = 0; i < n; i++)
                    if (got[i] != want[i] && !diff++) first = i;
                CHECK(diff == 0, "p %g n %zu offset %llu: %zu mask bits differ from the CPU's, first at %zu", (double)ps[pi],
                      n, (unsigned long long)offsets[o], diff, first);
                CHECK(gbuf_guards_ok(&dk.g), "mask guard");
                darr_free(&dk);
                free(want), free(got);
            }
    /* applied dropout: out = x * keep / (1 - p), in every dtype, in place too */
    for (int d = 0; d < 3; d++) {
        int dt = float_dtypes[d];
        size_t n = 10007;
        float *x = rnd_vals(n, 3.0f, dt, NULL);
        uint8_t *keep = malloc(n);
        tr_dropout_mask_bits(keep, n, 0.3f, key, 17);
        double *ref = malloc(n * 8);
        for (size_t i = 0; i < n; i++) ref[i] = keep[i] ? (double)(x[i] * (1.0f / (1.0f - 0.3f))) : 0.0;
        darr dx;
        darr_new(&dx, n, dt), darr_put(&dx, x);
        KCALL("dropout", tr_k_dropout_cuda(dx.g.data, dt, dx.g.data, dt, (int64_t)n, 0.3f, key.seed, key.step,
                                           key.layer, key.op, 17, dev_stream, ERR));
        expect_close("dropout (in place)", &dx, ref, dt == TR_F32 ? 1e-14 : nmse_bound(dt));
        darr_free(&dx);
        free(x), free(keep), free(ref);
    }
}

/* ------------------------------------------------------------ embedding, pooling, features */

static void test_embedding(void)
{
    for (int d = 0; d < 3; d++) {
        int dt = float_dtypes[d];
        const int64_t V = 97, C = 65, N = 301, pad = 0;
        int64_t *ids = malloc((size_t)N * sizeof *ids);
        for (int64_t i = 0; i < N; i++) ids[i] = (int64_t)(rnd_u32() % 13) * 7 % V; /* many repeats, some pad */
        double *t64, *g64;
        float *t = rnd_vals((size_t)(V * C), 1.0f, dt, &t64), *g = rnd_vals((size_t)(N * C), 1.0f, dt, &g64);
        darr dids, dt_, dout, dg, ddt;
        darr_new(&dids, (size_t)N, TR_I64), darr_put_raw(&dids, ids);
        darr_new(&dt_, (size_t)(V * C), dt), darr_put(&dt_, t);
        darr_new(&dout, (size_t)(N * C), dt), darr_poison(&dout);
        KCALL("embedding", tr_k_embedding_fwd_cuda(dout.g.data, dt, dids.g.data, dt_.g.data, dt, N, C, dev_stream, ERR));
        double *ref = malloc((size_t)(N * C) * 8);
        tr_k_embedding_fwd_f64(ref, ids, t64, N, C);
        expect_close("embedding", &dout, ref, 0);
        float *d0 = rnd_vals((size_t)(V * C), 1.0f, TR_F32, NULL);
        double *rd = f64_copy(d0, (size_t)(V * C));
        darr_new(&dg, (size_t)(N * C), dt), darr_put(&dg, g);
        darr_new(&ddt, (size_t)(V * C), TR_F32), darr_put(&ddt, d0);
        KCALL("embedding_backward",
              tr_k_embedding_bwd_cuda(ddt.g.data, dg.g.data, dt, dids.g.data, N, C, pad, dev_stream, ERR));
        tr_k_embedding_bwd_f64(rd, g64, ids, N, C, pad);
        expect_close("embedding.dtable (+=)", &ddt, rd, 1e-12);
        darr_free(&dids), darr_free(&dt_), darr_free(&dout), darr_free(&dg), darr_free(&ddt);
        free(ids), free(t), free(g), free(t64), free(g64), free(ref), free(d0), free(rd);
    }
}

static void test_pooling(void)
{
    const int64_t B = 5, T = 19, C = 130;
    int32_t mask[5 * 19];
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) mask[b * T + t] = b == 3 ? 0 : t < T - 3 * b; /* row 3: no token */
    for (int d = 0; d < 3; d++)
        for (int mode = 0; mode < 4; mode++) {
            int dt = float_dtypes[d];
            size_t nh = (size_t)(B * T * C), no = (size_t)(B * C);
            double *h64, *g64;
            float *h = rnd_vals(nh, 2.0f, dt, &h64), *g = rnd_vals(no, 1.0f, dt, &g64);
            darr dm, dh, dout, dg, ddh;
            darr_new(&dm, (size_t)(B * T), TR_I32), darr_put_raw(&dm, mask);
            darr_new(&dh, nh, dt), darr_put(&dh, h);
            darr_new(&dout, no, dt), darr_poison(&dout);
            KCALL("pool", tr_k_pool_fwd_cuda(dout.g.data, dt, dh.g.data, dt, dm.g.data, B, T, C, mode, dev_stream, ERR));
            double *ro = malloc(no * 8), *rh = malloc(nh * 8);
            tr_k_pool_fwd_f64(ro, h64, mask, B, T, C, mode);
            expect_close("pool", &dout, ro, nmse_bound(dt));
            darr_new(&dg, no, dt), darr_put(&dg, g);
            darr_new(&ddh, nh, dt), darr_poison(&ddh);
            KCALL("pool_backward", tr_k_pool_bwd_cuda(ddh.g.data, dt, dg.g.data, dt, dh.g.data, dt, dm.g.data, B, T, C,
                                                      mode, dev_stream, ERR));
            tr_k_pool_bwd_f64(rh, g64, h64, mask, B, T, C, mode);
            expect_close("pool.dhidden", &ddh, rh, nmse_bound(dt));
            darr_free(&dm), darr_free(&dh), darr_free(&dout), darr_free(&dg), darr_free(&ddh);
            free(h), free(g), free(h64), free(g64), free(ro), free(rh);
        }
}

static void test_features(void)
{
    for (int d = 0; d < 3; d++) {
        int dt = float_dtypes[d];
        const int64_t N = 33, SC = 70, DC = 200;
        double *s64, *d64;
        float *src = rnd_vals((size_t)(N * SC), 1.0f, dt, &s64), *dst = rnd_vals((size_t)(N * DC), 1.0f, dt, &d64);
        for (int acc = 0; acc < 2; acc++) {
            darr ds, dd;
            darr_new(&ds, (size_t)(N * SC), dt), darr_put(&ds, src);
            darr_new(&dd, (size_t)(N * DC), dt), darr_put(&dd, dst);
            double *ref = f64_copy(dst, (size_t)(N * DC));
            KCALL("copy_cols", tr_k_copy_cols_cuda(dd.g.data, dt, ds.g.data, dt, N, DC, 61, SC, 5, 64, acc, dev_stream,
                                                   ERR));
            tr_k_copy_cols_fwd_f64(ref, s64, N, DC, 61, SC, 5, 64, acc);
            expect_close(acc ? "copy_cols (+=)" : "copy_cols", &dd, ref, nmse_bound(dt));
            darr_free(&ds), darr_free(&dd);
            free(ref);
        }
        size_t n = 5001;
        double *a64, *b64, *g64;
        float *a = rnd_vals(n, 1.0f, dt, &a64), *b = rnd_vals(n, 1.0f, dt, &b64), *g = rnd_vals(n, 1.0f, dt, &g64);
        b[7] = a[7], b64[7] = a64[7]; /* a tie: sign(0) = 0 */
        darr da, db, dg, dout, dda, ddb;
        darr_new(&da, n, dt), darr_put(&da, a), darr_new(&db, n, dt), darr_put(&db, b);
        darr_new(&dg, n, dt), darr_put(&dg, g), darr_new(&dout, n, dt), darr_poison(&dout);
        darr_new(&dda, n, dt), darr_poison(&dda), darr_new(&ddb, n, dt), darr_poison(&ddb);
        double *ro = malloc(n * 8), *ra = malloc(n * 8), *rb = malloc(n * 8);
        KCALL("abs_diff", tr_k_abs_diff_fwd_cuda(dout.g.data, dt, da.g.data, dt, db.g.data, dt, (int64_t)n, dev_stream,
                                                 ERR));
        tr_k_abs_diff_fwd_f64(ro, a64, b64, (int64_t)n);
        expect_close("abs_diff", &dout, ro, nmse_bound(dt));
        KCALL("abs_diff_backward", tr_k_abs_diff_bwd_cuda(dda.g.data, dt, ddb.g.data, dt, dg.g.data, dt, da.g.data, dt,
                                                          db.g.data, dt, (int64_t)n, dev_stream, ERR));
        tr_k_abs_diff_bwd_f64(ra, rb, g64, a64, b64, (int64_t)n);
        expect_close("abs_diff.da", &dda, ra, nmse_bound(dt));
        expect_close("abs_diff.db", &ddb, rb, nmse_bound(dt));
        darr *all[] = { &da, &db, &dg, &dout, &dda, &ddb };
        for (size_t i = 0; i < 6; i++) darr_free(all[i]);
        free(src), free(dst), free(s64), free(d64), free(a), free(b), free(g), free(a64), free(b64), free(g64);
        free(ro), free(ra), free(rb);
    }
}

/* ------------------------------------------------------------ cross-entropy */

static void test_cross_entropy(void)
{
    static const int64_t shapes[][2] = { { 1, 2 }, { 37, 3 }, { 256, 1000 } };
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < 3; s++)
            for (int smooth = 0; smooth < 2; smooth++) {
                int dt = float_dtypes[d];
                int64_t N = shapes[s][0], K = shapes[s][1];
                float ls = smooth ? 0.1f : 0.0f;
                double *z64;
                float *z = rnd_vals((size_t)(N * K), 5.0f, dt, &z64);
                int64_t *tg = malloc((size_t)N * sizeof *tg);
                for (int64_t i = 0; i < N; i++) tg[i] = (i % 5 == 4) ? -100 : (int64_t)(rnd_u32() % (uint32_t)K);
                darr dz, dtg, dl, dlse, dcnt, ddz;
                darr_new(&dz, (size_t)(N * K), dt), darr_put(&dz, z);
                darr_new(&dtg, (size_t)N, TR_I64), darr_put_raw(&dtg, tg);
                darr_new(&dl, (size_t)N, TR_F32), darr_poison(&dl);
                darr_new(&dlse, (size_t)N, TR_F32), darr_poison(&dlse);
                darr_new(&dcnt, 1, TR_I64);
                KCALL("cross_entropy", tr_k_cross_entropy_fwd_cuda(dl.g.data, dlse.g.data, dcnt.g.data, dz.g.data, dt,
                                                                   dtg.g.data, N, K, -100, ls, dev_stream, ERR));
                double *rl = malloc((size_t)N * 8), *rlse = malloc((size_t)N * 8), *rdz = malloc((size_t)(N * K) * 8);
                int64_t want = tr_k_cross_entropy_fwd_f64(rl, rlse, z64, tg, N, K, -100, ls), got = -1;
                d2h(&got, &dcnt.g, sizeof got);
                CHECK(got == want, "count of rows not ignored %lld, want %lld", (long long)got, (long long)want);
                expect_close("cross_entropy.losses", &dl, rl, 1e-10);
                expect_close("cross_entropy.lse", &dlse, rlse, 1e-10);
                darr_new(&ddz, (size_t)(N * K), dt), darr_poison(&ddz);
                KCALL("cross_entropy_backward",
                      tr_k_cross_entropy_bwd_cuda(ddz.g.data, dt, dz.g.data, dt, dlse.g.data, dtg.g.data, dcnt.g.data,
                                                  0.5f, N, K, -100, ls, dev_stream, ERR));
                tr_k_cross_entropy_bwd_f64(rdz, z64, rlse, tg, want ? 0.5 / (double)want : 0, N, K, -100, ls);
                expect_close("cross_entropy.dlogits", &ddz, rdz, nmse_bound(dt));
                darr *all[] = { &dz, &dtg, &dl, &dlse, &dcnt, &ddz };
                for (size_t i = 0; i < 6; i++) darr_free(all[i]);
                free(z), free(z64), free(tg), free(rl), free(rlse), free(rdz);
            }
}

/* ------------------------------------------------------------ reductions */

static void test_reductions(void)
{
    for (int d = 0; d < 3; d++) {
        int dt = float_dtypes[d];
        static const int64_t sizes[] = { 1, 255, 100003, 3000001 };
        for (size_t s = 0; s < 4; s++) {
            size_t n = (size_t)sizes[s];
            double *x64;
            float *x = rnd_vals(n, 1.0f, dt, &x64);
            darr dx, dout, dscr;
            darr_new(&dx, n, dt), darr_put(&dx, x);
            darr_new(&dout, 1, TR_F32);
            darr_new(&dscr, (size_t)tr_k_reduce_scratch_cuda((int64_t)n), TR_F32);
            for (int sq = 0; sq < 2; sq++) {
                darr_poison(&dout);
                KCALL("sum", tr_k_sum_cuda(dout.g.data, dx.g.data, dt, (int64_t)n, sq, dscr.g.data, dev_stream, ERR));
                double ref = sq ? tr_k_sumsq_all_fwd_f64(x64, (int64_t)n) : tr_k_sum_all_fwd_f64(x64, (int64_t)n);
                /* a sum of n terms of either sign: compare with the scale of sum |x| */
                float got;
                d2h(&got, &dout.g, 4);
                double scale = 0;
                for (size_t i = 0; i < n; i++) scale += sq ? x64[i] * x64[i] : fabs(x64[i]);
                CHECK(fabs(got - ref) <= 1e-5 * scale + 1e-30, "%s of %zu: %.9g vs %.9g", sq ? "sumsq" : "sum", n,
                      (double)got, ref);
            }
            darr_free(&dx), darr_free(&dout), darr_free(&dscr);
            free(x), free(x64);
        }
        /* row sums */
        int64_t N = 77, C = 3001;
        double *x64;
        float *x = rnd_vals((size_t)(N * C), 1.0f, dt, &x64);
        darr dx, dout;
        darr_new(&dx, (size_t)(N * C), dt), darr_put(&dx, x), darr_new(&dout, (size_t)N, dt), darr_poison(&dout);
        KCALL("sum_lastdim", tr_k_sum_lastdim_cuda(dout.g.data, dt, dx.g.data, dt, N, C, dev_stream, ERR));
        double *ref = malloc((size_t)N * 8);
        tr_k_sum_lastdim_fwd_f64(ref, x64, N, C);
        expect_close("sum_lastdim", &dout, ref, dt == TR_F32 ? 1e-8 : nmse_bound(dt));
        darr_free(&dx), darr_free(&dout);
        free(x), free(x64), free(ref);
    }
}

/* Three tensors of three dtypes and sizes in one list: global squared norm, scale and
 * check (an inf is found; a clean list leaves the flag alone), clip coefficient. */
static void test_multi_tensor(void)
{
    static const int dts[3] = { TR_F32, TR_BF16, TR_F16 };
    static const int64_t ns[3] = { 1, 70001, 300 };
    darr t[3];
    float *v[3];
    double ss = 0;
    tr_k_tensor_ref refs[3];
    int64_t max_n = 0;
    for (int i = 0; i < 3; i++) {
        v[i] = rnd_vals((size_t)ns[i], 2.0f, dts[i], NULL);
        darr_new(&t[i], (size_t)ns[i], dts[i]), darr_put(&t[i], v[i]);
        for (int64_t j = 0; j < ns[i]; j++) ss += (double)v[i][j] * v[i][j];
        refs[i] = (tr_k_tensor_ref){ t[i].g.data, ns[i], dts[i], 0 };
        if (ns[i] > max_n) max_n = ns[i];
    }
    darr dlist, dout, dscr, dflag, dcoef, dnorm;
    darr_new(&dlist, sizeof refs, -1), darr_put_raw(&dlist, refs);
    darr_new(&dout, 1, TR_F32), darr_new(&dcoef, 1, TR_F32), darr_new(&dnorm, 1, TR_F32);
    darr_new(&dscr, (size_t)tr_k_global_sumsq_scratch_cuda(3, max_n), TR_F32);
    KCALL("global_norm", tr_k_global_sumsq_cuda(dout.g.data, dlist.g.data, 3, max_n, dscr.g.data, dev_stream, ERR));
    float got;
    d2h(&got, &dout.g, 4);
    CHECK(fabs(got - ss) <= 1e-5 * ss, "global sumsq %.9g vs %.9g", (double)got, ss);
    KCALL("clip_coef", tr_k_clip_coef_cuda(dcoef.g.data, dnorm.g.data, dout.g.data, 1.0f, dev_stream, ERR));
    float coef, norm;
    d2h(&coef, &dcoef.g, 4), d2h(&norm, &dnorm.g, 4);
    CHECK(fabs(norm - sqrt(ss)) <= 1e-5 * sqrt(ss), "norm %g vs %g", (double)norm, sqrt(ss));
    CHECK(fabs(coef - fmin(1.0, 1.0 / (sqrt(ss) + 1e-6))) <= 1e-6, "clip coefficient %g", (double)coef);
    /* scale by 0.5: clean, flag stays 0 */
    int32_t flag = 0;
    darr_new(&dflag, 1, TR_I32), darr_put_raw(&dflag, &flag);
    KCALL("scale_check", tr_k_scale_check_cuda(dlist.g.data, 3, max_n, 0.5f, dflag.g.data, dev_stream, ERR));
    d2h(&flag, &dflag.g, 4);
    CHECK(flag == 0, "a finite list raised the flag");
    for (int i = 0; i < 3; i++) {
        double *ref = malloc((size_t)ns[i] * 8);
        for (int64_t j = 0; j < ns[i]; j++) ref[j] = 0.5 * v[i][j];
        expect_close("scale_check (x 0.5)", &t[i], ref, 1e-30);
        free(ref);
    }
    /* an inf in the middle tensor: found */
    uint16_t inf_bf16 = 0x7f80;
    TCUDA(cudaMemcpyAsync((char *)t[1].g.data + 2 * 12345, &inf_bf16, 2, cudaMemcpyHostToDevice, dev_stream));
    KCALL("scale_check", tr_k_scale_check_cuda(dlist.g.data, 3, max_n, 1.0f, dflag.g.data, dev_stream, ERR));
    d2h(&flag, &dflag.g, 4);
    CHECK(flag == 1, "an inf was not found");
    darr *all[] = { &t[0], &t[1], &t[2], &dlist, &dout, &dscr, &dflag, &dcoef, &dnorm };
    for (size_t i = 0; i < 9; i++) darr_free(all[i]);
    for (int i = 0; i < 3; i++) free(v[i]);
}

/* ------------------------------------------------------------ optimizers */

static void test_optimizers(void)
{
    static const int64_t ns[3] = { 1, 100001, 769 };
    for (int which = 0; which < 2; which++) { /* 0 AdamW, 1 SGD with momentum (Nesterov) */
        darr p[3], g[3], m[3], v[3], h[3];
        double *rp[3], *rm[3], *rv[3];
        tr_k_param_ref refs[3];
        int64_t max_n = 0;
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)ns[i];
            float *pv = rnd_vals(n, 1.0f, TR_F32, NULL), *gv = rnd_vals(n, 0.1f, TR_F32, NULL);
            float *mv = rnd_vals(n, 0.01f, TR_F32, NULL), *vv = rnd_vals(n, 0.001f, TR_F32, NULL);
            for (size_t j = 0; j < n; j++) vv[j] = fabsf(vv[j]);
            darr_new(&p[i], n, TR_F32), darr_put(&p[i], pv), darr_new(&g[i], n, TR_F32), darr_put(&g[i], gv);
            darr_new(&m[i], n, TR_F32), darr_put(&m[i], mv), darr_new(&v[i], n, TR_F32), darr_put(&v[i], vv);
            darr_new(&h[i], n, TR_BF16), darr_poison(&h[i]);
            rp[i] = f64_copy(pv, n), rm[i] = f64_copy(mv, n), rv[i] = f64_copy(vv, n);
            double *rg = f64_copy(gv, n);
            if (which == 0)
                tr_k_adamw_step_f64(rp[i], rm[i], rv[i], rg, ns[i], 1e-3, 0.9, 0.999, 1e-8, i == 2 ? 0.0 : 0.01, 3,
                                    2.0);
            else
                tr_k_sgd_step_f64(rp[i], rm[i], rg, ns[i], 1e-2, 0.9, 0.1, i == 2 ? 0.0 : 0.01, 1, 0, 2.0);
            refs[i] = (tr_k_param_ref){ p[i].g.data, g[i].g.data, m[i].g.data, which == 0 ? v[i].g.data : NULL,
                                        h[i].g.data, ns[i], TR_BF16, i != 2 };
            if (ns[i] > max_n) max_n = ns[i];
            free(pv), free(gv), free(mv), free(vv), free(rg);
        }
        darr dlist;
        darr_new(&dlist, sizeof refs, -1), darr_put_raw(&dlist, refs);
        if (which == 0) {
            tr_k_adamw_args a = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, (float)(1 - pow(0.9, 3)),
                                  (float)sqrt(1 - pow(0.999, 3)), 0.5f, NULL, NULL, 3, 0 };
            KCALL("adamw", tr_k_adamw_cuda(dlist.g.data, 3, max_n, &a, dev_stream, ERR));
        } else {
            tr_k_sgd_args a = { 1e-2f, 0.9f, 0.1f, 0.01f, 0.5f, 1, 0, NULL, NULL, 0, 0 };
            KCALL("sgd", tr_k_sgd_cuda(dlist.g.data, 3, max_n, &a, dev_stream, ERR));
        }
        for (int i = 0; i < 3; i++) {
            expect_close(which ? "sgd.param" : "adamw.param", &p[i], rp[i], 1e-12);
            expect_close(which ? "sgd.momentum" : "adamw.m", &m[i], rm[i], 1e-12);
            if (which == 0) expect_close("adamw.v", &v[i], rv[i], 1e-12);
            expect_close("half copy (bf16)", &h[i], rp[i], nmse_bound(TR_BF16));
            darr_free(&p[i]), darr_free(&g[i]), darr_free(&m[i]), darr_free(&v[i]), darr_free(&h[i]);
            free(rp[i]), free(rm[i]), free(rv[i]);
        }
        darr_free(&dlist);
    }
}

/* ------------------------------------------------------------ attention */

static tr_rng_key attn_key = { 20261201, 5, 2, 1 };

static void attn_keep(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset)
{
    tr_dropout_mask_words(mask, n, p, *(const tr_rng_key *)key, offset);
}

static void attention_case(int dt, int64_t B, int64_t T, int64_t H, int64_t D, float p, int masked)
{
    size_t n = (size_t)(B * T * H * D), nl = (size_t)(B * H * T);
    double *q64, *k64, *v64, *g64;
    float *q = rnd_vals(n, 1.0f, dt, &q64), *k = rnd_vals(n, 1.0f, dt, &k64), *v = rnd_vals(n, 1.0f, dt, &v64);
    float *g = rnd_vals(n, 1.0f, dt, &g64);
    int32_t *mask = malloc((size_t)(B * T) * sizeof *mask);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) mask[b * T + t] = !masked || t < T - (b * 7) % (T > 1 ? T : 1);
    if (masked && B > 1)
        for (int64_t t = 0; t < T; t++) mask[1 * T + t] = 0; /* one sequence entirely padding */
    const float scale = 1.0f / sqrtf((float)D);
    darr dq, dk, dv, dout, dlse, dmask, dg, ddq, ddk, ddv, dscr;
    darr_new(&dq, n, dt), darr_put(&dq, q), darr_new(&dk, n, dt), darr_put(&dk, k);
    darr_new(&dv, n, dt), darr_put(&dv, v), darr_new(&dout, n, dt), darr_poison(&dout);
    darr_new(&dlse, nl, TR_F32), darr_poison(&dlse);
    darr_new(&dmask, (size_t)(B * T), TR_I32), darr_put_raw(&dmask, mask);
    KCALL("attention", tr_k_attention_fwd_cuda(dout.g.data, dlse.g.data, dq.g.data, dk.g.data, dv.g.data, dt,
                                               dmask.g.data, TR_I32, p, attn_key.seed, attn_key.step, attn_key.layer,
                                               attn_key.op, NULL, scale, B, T, H, D, dev_stream, ERR));
    sync_ok("attention");
    int nth = tr_k_attention_threads();
    double *scr = malloc(tr_k_attention_scratch_elems(T, D, nth) * sizeof *scr);
    double *ro = malloc(n * 8), *rl = malloc(nl * 8), *rq = malloc(n * 8), *rk = malloc(n * 8), *rv = malloc(n * 8);
    tr_attn_dropout drop = { p, attn_keep, &attn_key };
    tr_k_attention_fwd_f64(ro, rl, q64, k64, v64, mask, TR_I32, p > 0 ? &drop : NULL, scale, B, T, H, D, scr, nth);
    expect_close("attention.out", &dout, ro, nmse_bound(dt));
    {
        float *gl = malloc(nl * sizeof *gl);
        darr_get(gl, &dlse);
        size_t bad = 0;
        for (size_t i = 0; i < nl; i++)
            if (isinf(rl[i]) != isinf(gl[i]) || (!isinf(rl[i]) && fabs(gl[i] - rl[i]) > 1e-4 * (1 + fabs(rl[i])))) bad++;
        CHECK(bad == 0, "attention.lse: %zu of %zu rows differ (a padded row must be -inf)", bad, nl);
        free(gl);
    }
    darr_new(&dg, n, dt), darr_put(&dg, g);
    darr_new(&ddq, n, dt), darr_poison(&ddq), darr_new(&ddk, n, dt), darr_poison(&ddk);
    darr_new(&ddv, n, dt), darr_poison(&ddv);
    darr_new(&dscr, (size_t)tr_k_attention_bwd_scratch_cuda(B, T, H), TR_F32);
    KCALL("attention_backward",
          tr_k_attention_bwd_cuda(ddq.g.data, ddk.g.data, ddv.g.data, dg.g.data, dout.g.data, dq.g.data, dk.g.data,
                                  dv.g.data, dt, dlse.g.data, dmask.g.data, TR_I32, p, attn_key.seed, attn_key.step,
                                  attn_key.layer, attn_key.op, NULL, scale, B, T, H, D, dscr.g.data, dev_stream,
                                  ERR));
    sync_ok("attention_backward");
    tr_k_attention_bwd_f64(rq, rk, rv, g64, q64, k64, v64, rl, mask, TR_I32, p > 0 ? &drop : NULL, scale, B, T, H, D,
                           scr, nth);
    /* the GPU's delta uses its own (rounded) out: half dtypes get a looser bound */
    double gb = dt == TR_F32 ? 1e-8 : nmse_bound(dt) * 4;
    expect_close("attention.dq", &ddq, rq, gb);
    expect_close("attention.dk", &ddk, rk, gb);
    expect_close("attention.dv", &ddv, rv, gb);
    darr *all[] = { &dq, &dk, &dv, &dout, &dlse, &dmask, &dg, &ddq, &ddk, &ddv, &dscr };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) darr_free(all[i]);
    free(q), free(k), free(v), free(g), free(q64), free(k64), free(v64), free(g64), free(mask), free(scr);
    free(ro), free(rl), free(rq), free(rk), free(rv);
}

static void test_attention(void)
{
    static const int64_t shapes[][4] = { { 1, 1, 1, 32 }, { 2, 37, 3, 64 }, { 3, 130, 2, 128 }, { 2, 64, 4, 48 },
                                         { 1, 513, 1, 64 } };
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int variant = 0; variant < 3; variant++) /* plain, masked, masked + dropout */
                attention_case(float_dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                               variant == 2 ? 0.1f : 0.0f, variant >= 1);
}

/* ------------------------------------------------------------ main */

static void run_case(const char *name, void (*fn)(void))
{
    worst_nmse = 0;
    check_case_name = name;
    check_case_failed = 0;
    fn();
    if (check_case_failed) check_cases_failed++;
    else printf("PASS %s (worst nmse %.2e)\n", name, worst_nmse);
    fflush(stdout);
    cases_run++;
}
#define NN_CASE(fn) run_case(#fn, fn)

int main(void)
{
    if (tr_cuda_device_count() < 1) {
        printf("SKIP test_gpu_nn: no CUDA device is visible\n");
        return 0;
    }
    if (gt_init_device()) return 1;
    NN_CASE(test_layernorm);
    NN_CASE(test_gelu_tanh);
    NN_CASE(test_softmax_l2norm);
    NN_CASE(test_dropout_bits);
    NN_CASE(test_embedding);
    NN_CASE(test_pooling);
    NN_CASE(test_features);
    NN_CASE(test_cross_entropy);
    NN_CASE(test_reductions);
    NN_CASE(test_multi_tensor);
    NN_CASE(test_optimizers);
    NN_CASE(test_attention);
    gt_check_device_at_exit();
    tr_cuda_release_device(dev_state);
    tr_alloc_destroy(dev_alloc);
    return gt_done();
}
