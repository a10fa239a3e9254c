/* test_attention.c — the tiled attention kernels (kernels/cpu/attention.c): forward against
 * a naive f64 attention that materialises T x T (with i32/f32 padding masks, dropout,
 * several query blocks with a partial last one), f32 against f64 with an f32 mask, fully
 * masked rows, guard regions (backward against finite differences: test_ops_table.c), the
 * f32 kernels on every product path this CPU runs (cblas, AVX2, AVX-512 tiles) against f64
 * for short rows (T < 16) and T not a multiple of the row stride, with padded keys and
 * dropout, results that do not depend on the number of threads, and the query-rows calls (a
 * sequence's first rows only) against the whole call's bits, f32 and bf16. The dropout keep masks come from a
 * test hash here (uniform >= p); the tensor-level op feeds the keyed Philox stream. */
#include "check.h"
#include "attn_isa.h"
#include "op_check.h"
#include "tr_base.h"
#include "cpu/attention.h"
#include "cpu/attn_short.h"
#include "cpu/attn_tile.h"
#include "cpu/bf16_bits.h"

/* ------------------------------------------------------------ test uniforms */

static void hash_uniform(float *out, size_t n, const void *key, uint64_t offset)
{
    uint64_t seed = *(const uint64_t *)key;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = seed ^ ((offset + i) * 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        out[i] = (float)(z >> 40) * (1.0f / 16777216.0f);
    }
}

/* mask[i] = all ones when the hash uniform of element offset + i >= p, as
 * tr_dropout_mask_words defines it. */
static void hash_keep(uint32_t *mask, size_t n, float p, const void *key, uint64_t offset)
{
    float *u = malloc(n * sizeof *u);
    hash_uniform(u, n, key, offset);
    for (size_t i = 0; i < n; i++) mask[i] = u[i] >= p ? 0xFFFFFFFFu : 0u;
    free(u);
}

/* ------------------------------------------------------------ naive reference */

static void naive_attention(double *out, double *lse, const double *q, const double *k,
                            const double *v, const int32_t *mask, const tr_attn_dropout *drop,
                            double scale, int64_t B, int64_t T, int64_t H, int64_t D)
{
    double *P = malloc(8 * T);
    uint32_t *K = malloc(4 * (size_t)T);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                double mx = -INFINITY;
                for (int64_t j = 0; j < T; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += q[((b * T + i) * H + h) * D + d] * k[((b * T + j) * H + h) * D + d];
                    P[j] = (mask && !mask[b * T + j]) ? -INFINITY : s * scale;
                    if (P[j] > mx) mx = P[j];
                }
                double sum = 0;
                for (int64_t j = 0; j < T; j++) sum += mx == -INFINITY ? 0 : exp(P[j] - mx);
                lse[(b * H + h) * T + i] = mx == -INFINITY ? -INFINITY : mx + log(sum);
                for (int64_t j = 0; j < T; j++) P[j] = mx == -INFINITY ? 0 : exp(P[j] - mx) / sum;
                if (drop && drop->p > 0) {
                    drop->keep(K, (size_t)T, drop->p, drop->key, (uint64_t)(((b * H + h) * T + i) * T));
                    for (int64_t j = 0; j < T; j++) P[j] = K[j] ? P[j] / (1 - (double)drop->p) : 0;
                }
                for (int64_t d = 0; d < D; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < T; j++) o += P[j] * v[((b * T + j) * H + h) * D + d];
                    out[((b * T + i) * H + h) * D + d] = o;
                }
            }
    free(P);
    free(K);
}

/* ------------------------------------------------------------ a problem instance */

typedef struct {
    int64_t B, T, H, D, n;           /* n = B*T*H*D */
    double *q, *k, *v, *R, *out, *lse, *scratch;
    int32_t *mask;                    /* NULL = none */
    tr_attn_dropout drop, *dropp;
    uint64_t seed;
    double scale;
    int nthreads;
} attn_case;

static void case_init(attn_case *c, int64_t B, int64_t T, int64_t H, int64_t D, int with_mask,
                      float p)
{
    c->B = B; c->T = T; c->H = H; c->D = D; c->n = B * T * H * D;
    c->q = malloc(8 * c->n); c->k = malloc(8 * c->n); c->v = malloc(8 * c->n);
    c->R = malloc(8 * c->n); c->out = malloc(8 * c->n); c->lse = malloc(8 * B * H * T);
    oc_fill(c->q, c->n, 1.5);
    oc_fill(c->k, c->n, 1.5);
    oc_fill(c->v, c->n, 1);
    oc_fill(c->R, c->n, 1);
    c->mask = NULL;
    if (with_mask) {
        /* batch b keeps its first T - b*(T/3) - 1 keys (at least one): padded tails */
        c->mask = malloc(4 * B * T);
        for (int64_t b = 0; b < B; b++) {
            int64_t keep = T - b * (T / 3) - 1;
            if (keep < 1) keep = 1;
            for (int64_t j = 0; j < T; j++) c->mask[b * T + j] = j < keep;
        }
    }
    c->seed = 12345;
    c->drop.p = p;
    c->drop.keep = hash_keep;
    c->drop.key = &c->seed;
    c->dropp = p > 0 ? &c->drop : NULL;
    c->scale = 1 / sqrt((double)D);
    c->nthreads = tr_k_attention_threads();
    c->scratch = malloc(8 * tr_k_attention_scratch_elems(T, D, c->nthreads));
}

static void case_free(attn_case *c)
{
    free(c->q); free(c->k); free(c->v); free(c->R); free(c->out); free(c->lse);
    free(c->mask); free(c->scratch);
}

static double attn_loss(void *p)
{
    attn_case *c = p;
    tr_k_attention_fwd_f64(c->out, c->lse, c->q, c->k, c->v, c->mask, TR_I32, c->dropp,
                             c->scale, c->B, c->T, c->H, c->D, c->scratch, c->nthreads);
    return oc_dot(c->out, c->R, c->n);
}

/* ------------------------------------------------------------ cases */

static void test_attention_forward_matches_naive(void)
{
    static const int64_t shapes[][6] = {
        /* B, T, H, D, mask, dropout percent */
        { 1, 1, 1, 1, 0, 0 }, { 2, 5, 3, 4, 1, 0 }, { 2, 5, 3, 4, 1, 30 },
        { 1, 70, 2, 3, 1, 30 }, { 2, 130, 1, 2, 0, 0 }, { 3, 129, 2, 5, 1, 10 },
    };
    oc_seed(30);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        attn_case c;
        case_init(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], (int)shapes[s][4],
                  (float)shapes[s][5] / 100);
        double *out = oc_guarded(8 * c.n), *lse = oc_guarded(8 * c.B * c.H * c.T);
        double *rout = malloc(8 * c.n), *rlse = malloc(8 * c.B * c.H * c.T);
        tr_k_attention_fwd_f64(out, lse, c.q, c.k, c.v, c.mask, TR_I32, c.dropp, c.scale, c.B,
                                 c.T, c.H, c.D, c.scratch, c.nthreads);
        naive_attention(rout, rlse, c.q, c.k, c.v, c.mask, c.dropp, c.scale, c.B, c.T, c.H, c.D);
        CHECK(oc_rel_err(out, rout, c.n) < 1e-12, "case %zu out rel err %g", s, oc_rel_err(out, rout, c.n));
        CHECK(oc_rel_err(lse, rlse, c.B * c.H * c.T) < 1e-12, "case %zu lse", s);
        CHECK(oc_guard_ok(out) && oc_guard_ok(lse), "case %zu guards", s);
        oc_guarded_free(out); oc_guarded_free(lse); free(rout); free(rlse);
        case_free(&c);
    }
}

static void test_attention_fully_masked_rows_are_zero_not_nan(void)
{
    attn_case c;
    oc_seed(32);
    case_init(&c, 2, 7, 2, 3, 1, 0.25f);
    for (int64_t j = 0; j < c.T; j++) c.mask[1 * c.T + j] = 0;    /* batch 1: every key padded */
    double *dq = malloc(8 * c.n), *dk = malloc(8 * c.n), *dv = malloc(8 * c.n);
    attn_loss(&c);
    tr_k_attention_bwd_f64(dq, dk, dv, c.R, c.q, c.k, c.v, c.lse, c.mask, TR_I32, c.dropp,
                              c.scale, c.B, c.T, c.H, c.D, c.scratch, c.nthreads);
    CHECK(oc_all_finite(c.out, c.n) && oc_all_finite(dq, c.n) && oc_all_finite(dk, c.n) &&
              oc_all_finite(dv, c.n), "NaN or inf in outputs or gradients");
    int64_t half = c.n / 2;
    int zero = 1;
    for (int64_t i = half; i < c.n; i++) zero &= c.out[i] == 0 && dq[i] == 0 && dk[i] == 0 && dv[i] == 0;
    CHECK(zero, "fully masked batch must give out = 0 and zero gradients");
    CHECK(c.lse[c.H * c.T] == -INFINITY, "lse of a fully masked row is -inf: %g", c.lse[c.H * c.T]);
    free(dq); free(dk); free(dv);
    case_free(&c);
}

static void test_attention_f32_matches_f64_and_f32_mask(void)
{
    attn_case c;
    oc_seed(33);
    case_init(&c, 2, 130, 2, 8, 1, 0.1f);
    int64_t n = c.n, nl = c.B * c.H * c.T;
    double *dq = malloc(8 * n), *dk = malloc(8 * n), *dv = malloc(8 * n);
    attn_loss(&c);
    tr_k_attention_bwd_f64(dq, dk, dv, c.R, c.q, c.k, c.v, c.lse, c.mask, TR_I32, c.dropp,
                              c.scale, c.B, c.T, c.H, c.D, c.scratch, c.nthreads);
    float *qf = malloc(4 * n), *kf = malloc(4 * n), *vf = malloc(4 * n), *Rf = malloc(4 * n);
    float *of = oc_guarded(4 * n), *lf = oc_guarded(4 * nl), *dqf = oc_guarded(4 * n);
    float *dkf = oc_guarded(4 * n), *dvf = oc_guarded(4 * n), *maskf = malloc(4 * c.B * c.T);
    float *scr = malloc(4 * tr_k_attention_scratch_elems(c.T, c.D, c.nthreads));
    oc_to_f32(qf, c.q, n); oc_to_f32(kf, c.k, n); oc_to_f32(vf, c.v, n); oc_to_f32(Rf, c.R, n);
    for (int64_t i = 0; i < c.B * c.T; i++) maskf[i] = (float)c.mask[i];
    tr_k_attention_fwd_f32(of, lf, qf, kf, vf, maskf, TR_F32, c.dropp, (float)c.scale, c.B, c.T,
                             c.H, c.D, scr, c.nthreads);
    tr_k_attention_bwd_f32(dqf, dkf, dvf, Rf, qf, kf, vf, lf, maskf, TR_F32, c.dropp,
                              (float)c.scale, c.B, c.T, c.H, c.D, scr, c.nthreads);
    CHECK(oc_rel_err_f32(of, c.out, n) < 1e-5, "out %g", oc_rel_err_f32(of, c.out, n));
    CHECK(oc_rel_err_f32(lf, c.lse, nl) < 1e-5, "lse %g", oc_rel_err_f32(lf, c.lse, nl));
    CHECK(oc_rel_err_f32(dqf, dq, n) < 1e-5, "dq %g", oc_rel_err_f32(dqf, dq, n));
    CHECK(oc_rel_err_f32(dkf, dk, n) < 1e-5, "dk %g", oc_rel_err_f32(dkf, dk, n));
    CHECK(oc_rel_err_f32(dvf, dv, n) < 1e-5, "dv %g", oc_rel_err_f32(dvf, dv, n));
    CHECK(oc_guard_ok(of) && oc_guard_ok(lf) && oc_guard_ok(dqf) &&
              oc_guard_ok(dkf) && oc_guard_ok(dvf), "guards");
    free(dq); free(dk); free(dv); free(qf); free(kf); free(vf); free(Rf); free(maskf); free(scr);
    oc_guarded_free(of); oc_guarded_free(lf); oc_guarded_free(dqf); oc_guarded_free(dkf);
    oc_guarded_free(dvf);
    case_free(&c);
}

static void test_attention_independent_of_thread_count(void)
{
    attn_case c;
    oc_seed(34);
    case_init(&c, 2, 100, 3, 4, 1, 0.2f);
    int64_t n = c.n;
    double *o1 = malloc(8 * n), *g1 = malloc(8 * 3 * n), *g2 = malloc(8 * 3 * n);
    tr_k_attention_fwd_f64(o1, c.lse, c.q, c.k, c.v, c.mask, TR_I32, c.dropp, c.scale, c.B, c.T,
                             c.H, c.D, c.scratch, 1);
    tr_k_attention_bwd_f64(g1, g1 + n, g1 + 2 * n, c.R, c.q, c.k, c.v, c.lse, c.mask, TR_I32,
                              c.dropp, c.scale, c.B, c.T, c.H, c.D, c.scratch, 1);
    attn_loss(&c);
    tr_k_attention_bwd_f64(g2, g2 + n, g2 + 2 * n, c.R, c.q, c.k, c.v, c.lse, c.mask, TR_I32,
                              c.dropp, c.scale, c.B, c.T, c.H, c.D, c.scratch, c.nthreads);
    CHECK(memcmp(o1, c.out, 8 * n) == 0, "forward differs between 1 and %d threads", c.nthreads);
    CHECK(memcmp(g1, g2, 8 * 3 * n) == 0, "backward differs between 1 and %d threads", c.nthreads);
    free(o1); free(g1); free(g2);
    case_free(&c);
}

/* The f32 forward and backward on product path isa against the f64 kernels (whose
 * forward matches the naive attention above) on c; 0 and CHECK reports on a mismatch. */
static int f32_path_matches_f64(int isa, const char *isa_name, attn_case *c, int nthreads)
{
    int64_t n = c->n, nl = c->B * c->H * c->T;
    double *dq = malloc(8 * n), *dk = malloc(8 * n), *dv = malloc(8 * n);
    attn_loss(c);
    tr_k_attention_bwd_f64(dq, dk, dv, c->R, c->q, c->k, c->v, c->lse, c->mask, TR_I32, c->dropp,
                           c->scale, c->B, c->T, c->H, c->D, c->scratch, c->nthreads);
    float *qf = malloc(4 * n), *kf = malloc(4 * n), *vf = malloc(4 * n), *Rf = malloc(4 * n);
    float *of = oc_guarded(4 * n), *lf = oc_guarded(4 * nl), *dqf = oc_guarded(4 * n);
    float *dkf = oc_guarded(4 * n), *dvf = oc_guarded(4 * n);
    float *scr = malloc(4 * tr_k_attention_scratch_elems(c->T, c->D, nthreads));
    oc_to_f32(qf, c->q, n); oc_to_f32(kf, c->k, n); oc_to_f32(vf, c->v, n); oc_to_f32(Rf, c->R, n);
    tr_k_attention_fwd_isa_f32(isa, of, lf, qf, kf, vf, c->mask, TR_I32, c->dropp, (float)c->scale, c->B, c->T,
                               c->H, c->D, scr, nthreads);
    tr_k_attention_bwd_isa_f32(isa, dqf, dkf, dvf, Rf, qf, kf, vf, lf, c->mask, TR_I32, c->dropp, (float)c->scale,
                               c->B, c->T, c->H, c->D, scr, nthreads);
    double e[5] = { oc_rel_err_f32(of, c->out, n), oc_rel_err_f32(lf, c->lse, nl), oc_rel_err_f32(dqf, dq, n),
                    oc_rel_err_f32(dkf, dk, n), oc_rel_err_f32(dvf, dv, n) };
    int guards = oc_guard_ok(of) && oc_guard_ok(lf) && oc_guard_ok(dqf) && oc_guard_ok(dkf) && oc_guard_ok(dvf);
    int ok = e[0] < 1e-5 && e[1] < 1e-5 && e[2] < 1e-5 && e[3] < 1e-5 && e[4] < 1e-5 && guards;
    CHECK(ok, "%s, %d threads, B=%lld T=%lld H=%lld D=%lld mask=%d p=%g: rel err out %g lse %g dq %g dk %g dv %g, guards %s",
          isa_name, nthreads, (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->D, c->mask != NULL,
          (double)c->drop.p, e[0], e[1], e[2], e[3], e[4], guards ? "intact" : "WRITTEN");
    free(dq); free(dk); free(dv); free(qf); free(kf); free(vf); free(Rf); free(scr);
    oc_guarded_free(of); oc_guarded_free(lf); oc_guarded_free(dqf); oc_guarded_free(dkf); oc_guarded_free(dvf);
    return ok;
}

static void test_attention_f32_every_path_matches_f64(void)
{
    static const int isas[] = { TR_ATTN_ISA_BLAS, TR_ATTN_ISA_AVX2, TR_ATTN_ISA_AVX512 };
    static const char *names[] = { "cblas", "avx2", "avx512" };
    static const int64_t shapes[][6] = {
        /* B, T, H, D, mask, dropout percent: short rows, T around 16, several blocks */
        { 1, 1, 1, 1, 0, 0 },   { 2, 7, 3, 8, 1, 30 },  { 3, 15, 2, 32, 1, 0 }, { 2, 16, 2, 64, 1, 20 },
        { 2, 17, 2, 48, 1, 10 }, { 4, 23, 3, 80, 1, 0 }, { 2, 130, 2, 33, 1, 10 }, { 1, 129, 2, 128, 0, 20 },
    };
    oc_seed(35);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!attn_isa_runs(isas[i], names[i])) continue;
        int bad = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !bad; s++) {
            attn_case c;
            case_init(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], (int)shapes[s][4],
                      (float)shapes[s][5] / 100);
            bad += !f32_path_matches_f64(isas[i], names[i], &c, c.nthreads);
            case_free(&c);
        }
    }
}

/* The short-row path (attn_short.h: T <= 32, D 32 or 64, no dropout) on one ISA against the
 * f64 kernels, forward and the tiled backward on its lse, with padded tails, an f32 mask and
 * a batch row whose keys are all masked (out 0, lse -inf, on every head of it). */
static void short_rows_match_f64(int isa, const char *name)
{
    static const int64_t shapes[][4] = {   /* B, T, H, D */
        { 1, 1, 1, 32 }, { 2, 5, 3, 32 }, { 3, 16, 2, 32 }, { 3, 17, 2, 32 }, { 4, 31, 3, 32 },
        { 2, 32, 2, 32 }, { 3, 3, 2, 64 }, { 2, 16, 2, 64 }, { 3, 20, 2, 64 }, { 2, 32, 3, 64 },
    };
    const int64_t most = isa == TR_ATTN_ISA_AVX512 ? TR_ATTN_SHORT_MAX_T : TR_ATTN_SHORT_MAX_T_AVX2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (shapes[s][1] > most) {   /* beyond this isa's short rows: the tiled path, tested elsewhere */
            CHECK(!tr_attn_short_usable(isa, shapes[s][1], shapes[s][3], 0), "%s: T=%lld must not be short", name,
                  (long long)shapes[s][1]);
            continue;
        }
        CHECK(tr_attn_short_usable(isa, shapes[s][1], shapes[s][3], 0), "%s: T=%lld D=%lld not short", name,
              (long long)shapes[s][1], (long long)shapes[s][3]);
        attn_case c;
        case_init(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 1, 0);
        int ok = f32_path_matches_f64(isa, name, &c, c.nthreads);
        case_free(&c);
        if (!ok) return;
    }
    /* f32 mask, batch row 1 fully masked (T = 7: short rows on both ISAs) */
    attn_case c;
    case_init(&c, 3, 7, 4, 32, 1, 0);
    for (int64_t j = 0; j < c.T; j++) c.mask[1 * c.T + j] = 0;
    int64_t n = c.n, nl = c.B * c.H * c.T, per_b = c.T * c.H * c.D;
    attn_loss(&c);
    float *qf = malloc(4 * n), *kf = malloc(4 * n), *vf = malloc(4 * n), *maskf = malloc(4 * c.B * c.T);
    float *of = oc_guarded(4 * n), *lf = oc_guarded(4 * nl);
    float *scr = malloc(4 * tr_k_attention_scratch_elems(c.T, c.D, c.nthreads));
    oc_to_f32(qf, c.q, n); oc_to_f32(kf, c.k, n); oc_to_f32(vf, c.v, n);
    for (int64_t i = 0; i < c.B * c.T; i++) maskf[i] = (float)c.mask[i];
    tr_k_attention_fwd_isa_f32(isa, of, lf, qf, kf, vf, maskf, TR_F32, NULL, (float)c.scale, c.B, c.T, c.H, c.D, scr,
                               c.nthreads);
    int zero = 1, neg_inf = 1;
    for (int64_t i = per_b; i < 2 * per_b; i++) zero &= of[i] == 0;
    for (int64_t i = c.H * c.T; i < 2 * c.H * c.T; i++) neg_inf &= lf[i] == -INFINITY;
    CHECK(zero && neg_inf, "%s: a fully masked batch row: out must be 0 (%d) and lse -inf (%d)", name, zero, neg_inf);
    double worst = 0;
    for (int64_t b = 0; b < c.B; b += 2) {   /* rows 0 and 2 against f64 */
        double e = oc_rel_err_f32(of + b * per_b, c.out + b * per_b, per_b);
        worst = e > worst ? e : worst;
    }
    CHECK(worst < 1e-5 && oc_guard_ok(of) && oc_guard_ok(lf), "%s, f32 mask: rel err %g, guards %s", name, worst,
          oc_guard_ok(of) && oc_guard_ok(lf) ? "intact" : "WRITTEN");
    /* the same bits on one thread */
    float *o1 = malloc(4 * n), *l1 = malloc(4 * nl);
    tr_k_attention_fwd_isa_f32(isa, o1, l1, qf, kf, vf, maskf, TR_F32, NULL, (float)c.scale, c.B, c.T, c.H, c.D, scr,
                               1);
    CHECK(memcmp(o1, of, 4 * n) == 0 && memcmp(l1, lf, 4 * nl) == 0, "%s short path: 1 thread differs from %d", name,
          c.nthreads);
    free(o1); free(l1);
    free(qf); free(kf); free(vf); free(maskf); free(scr);
    oc_guarded_free(of); oc_guarded_free(lf);
    case_free(&c);
}

static void test_attention_short_rows_match_f64(void)
{
    CHECK(!tr_attn_short_usable(TR_ATTN_ISA_AVX512, 33, 32, 0) && !tr_attn_short_usable(TR_ATTN_ISA_AVX512, 16, 48, 0) &&
              !tr_attn_short_usable(TR_ATTN_ISA_AVX2, 16, 32, 1) && !tr_attn_short_usable(TR_ATTN_ISA_BLAS, 16, 32, 0),
          "the short path must refuse T > 32, D not 32 or 64, dropout and the BLAS path");
    static const int isas[] = { TR_ATTN_ISA_AVX2, TR_ATTN_ISA_AVX512 };
    static const char *names[] = { "avx2 short", "avx512 short" };
    oc_seed(37);
    for (int i = 0; i < 2; i++) {
        if (!attn_isa_runs(isas[i], names[i])) continue;
        short_rows_match_f64(isas[i], names[i]);
    }
}

/* The tile path gives the same bits on 1 thread as on all of them (a head's work does not
 * depend on which thread runs it, nor on how the forward groups its blocks into tasks). */
static void test_attention_f32_independent_of_thread_count(void)
{
    attn_case c;
    oc_seed(36);
    case_init(&c, 2, 100, 3, 24, 1, 0.2f);
    int64_t n = c.n, nl = c.B * c.H * c.T;
    int nt = c.nthreads > 1 ? c.nthreads : 2;
    float *qf = malloc(4 * n), *kf = malloc(4 * n), *vf = malloc(4 * n), *Rf = malloc(4 * n);
    float *o[2], *l[2], *g[2];
    float *scr = malloc(4 * tr_k_attention_scratch_elems(c.T, c.D, nt));
    oc_to_f32(qf, c.q, n); oc_to_f32(kf, c.k, n); oc_to_f32(vf, c.v, n); oc_to_f32(Rf, c.R, n);
    for (int r = 0; r < 2; r++) {
        int threads = r == 0 ? 1 : nt;
        o[r] = malloc(4 * n); l[r] = malloc(4 * nl); g[r] = malloc(4 * 3 * n);
        tr_k_attention_fwd_f32(o[r], l[r], qf, kf, vf, c.mask, TR_I32, c.dropp, (float)c.scale, c.B, c.T, c.H, c.D,
                               scr, threads);
        tr_k_attention_bwd_f32(g[r], g[r] + n, g[r] + 2 * n, Rf, qf, kf, vf, l[r], c.mask, TR_I32, c.dropp,
                               (float)c.scale, c.B, c.T, c.H, c.D, scr, threads);
    }
    CHECK(memcmp(o[0], o[1], 4 * n) == 0 && memcmp(l[0], l[1], 4 * nl) == 0, "forward differs between 1 and %d threads",
          nt);
    CHECK(memcmp(g[0], g[1], 4 * 3 * n) == 0, "backward differs between 1 and %d threads", nt);
    for (int r = 0; r < 2; r++) { free(o[r]); free(l[r]); free(g[r]); }
    free(qf); free(kf); free(vf); free(Rf); free(scr);
    case_free(&c);
}

/* ------------------------------------------------------------ query rows */

/* One query-rows variant: a relative-position table (rel), a window (win), dropout p. */
typedef struct {
    int rel, win;
    float p;
} qr_variant;

/* Half of q's rows as bf16 bits, or their values back. */
static void to_bf16(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = tr_bf16_from_f32_bits(tr_f32_bits(src[i]));
}

/* The f32 (half 0) or bf16 (half 1) kernels on c's values rounded to f32 (and to bf16); rel
 * with the variant's table, window and query rows nq (0: all). Out, lse and the gradients (of
 * dout, f32) come back in f32; dtab: the table's gradient (+=), when the variant has one. */
static void qr_run(const attn_case *c, const qr_variant *v, int half, int64_t nq, const float *dout, const float *tab,
                   float *dtab, float *out, float *lse, float *dq, float *dk, float *dv)
{
    const int64_t n = c->n, B = c->B, T = c->T, H = c->H, D = c->D;
    /* every output starts as NaN bits, so a row the kernels leave unwritten shows */
    memset(out, 0xFF, 4 * (size_t)n); memset(lse, 0xFF, 4 * (size_t)(B * H * T));
    memset(dq, 0xFF, 4 * (size_t)n); memset(dk, 0xFF, 4 * (size_t)n); memset(dv, 0xFF, 4 * (size_t)n);
    float *qf = malloc(4 * n), *kf = malloc(4 * n), *vf = malloc(4 * n);
    oc_to_f32(qf, c->q, n); oc_to_f32(kf, c->k, n); oc_to_f32(vf, c->v, n);
    float *dist = malloc(4 * (size_t)(B * H * (2 * T - 1)));
    tr_attn_relpos rel = { v->rel ? tab : NULL, v->rel ? dtab : NULL, dist, 8, 20, 1, v->win, nq };
    tr_attn_dropout drop = { v->p, hash_keep, &c->seed };
    const tr_attn_dropout *dp = v->p > 0 ? &drop : NULL;
    const float scale = (float)c->scale;
    if (!half) {
        float *scr = malloc(4 * tr_k_attention_scratch_elems(T, D, c->nthreads));
        tr_k_attention_fwd_rel_f32(out, lse, qf, kf, vf, c->mask, TR_I32, dp, &rel, scale, B, T, H, D, scr,
                                   c->nthreads);
        tr_k_attention_bwd_rel_f32(dq, dk, dv, dout, qf, kf, vf, lse, c->mask, TR_I32, dp, &rel, scale, B, T, H, D,
                                   scr, c->nthreads);
        free(scr);
    } else {
        uint16_t *h = malloc(2 * 8 * (size_t)n);
        memset(h, 0xFF, 2 * 8 * (size_t)n);
        uint16_t *hq = h, *hk = h + n, *hv = h + 2 * n, *ho = h + 3 * n, *hg = h + 4 * n;
        uint16_t *hdq = h + 5 * n, *hdk = h + 6 * n, *hdv = h + 7 * n;
        to_bf16(hq, qf, n); to_bf16(hk, kf, n); to_bf16(hv, vf, n); to_bf16(hg, dout, n);
        float *scr = malloc(4 * tr_k_attention_bf16_scratch_elems(T, D, c->nthreads));
        tr_k_attention_fwd_bf16(ho, lse, hq, hk, hv, c->mask, TR_I32, dp, &rel, scale, B, T, H, D, scr, c->nthreads);
        tr_k_attention_bwd_bf16(hdq, hdk, hdv, hg, hq, hk, hv, lse, c->mask, TR_I32, dp, &rel, scale, B, T, H, D, scr,
                                c->nthreads);
        for (int64_t i = 0; i < n; i++) {
            out[i] = tr_f32_from_bf16_bits(ho[i]);
            dq[i] = tr_f32_from_bf16_bits(hdq[i]);
            dk[i] = tr_f32_from_bf16_bits(hdk[i]);
            dv[i] = tr_f32_from_bf16_bits(hdv[i]);
        }
        free(h);
        free(scr);
    }
    free(qf); free(kf); free(vf); free(dist);
}

/* Query rows nq against the whole call: the first nq rows of out and lse are the whole call's
 * bits, the others 0 and -inf; with dout's rows past nq set to 0 for the whole call (and left
 * random for the nq call, which must not read them), dq's first rows, dk, dv and the table's
 * gradient are the whole call's bits and dq's other rows 0. */
static int qr_case(int64_t B, int64_t T, int64_t H, int64_t D, const qr_variant *v, int half, int64_t nq)
{
    attn_case c;
    case_init(&c, B, T, H, D, 1, 0);
    const int64_t n = c.n, nl = B * H * T, ld = H * D;
    float *g = malloc(4 * n), *g0 = malloc(4 * n), *tab = malloc(4 * 8 * H), *dt[2];
    float *o[2], *l[2], *dq[2], *dk[2], *dv[2];
    oc_to_f32(g, c.R, n);
    memcpy(g0, g, 4 * n);
    for (int64_t b = 0; b < B; b++) memset(g0 + (b * T + nq) * ld, 0, 4 * (size_t)((T - nq) * ld));
    for (int i = 0; i < 8 * H; i++) tab[i] = (float)oc_rand();
    for (int r = 0; r < 2; r++) {
        o[r] = malloc(4 * n); l[r] = malloc(4 * nl); dq[r] = malloc(4 * n); dk[r] = malloc(4 * n); dv[r] = malloc(4 * n);
        dt[r] = calloc((size_t)(8 * H), 4);
        qr_run(&c, v, half, r ? nq : 0, r ? g : g0, tab, dt[r], o[r], l[r], dq[r], dk[r], dv[r]);
    }
    int ok = 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const float *o0 = o[0] + (b * T + t) * ld, *o1 = o[1] + (b * T + t) * ld;
            const float *q0 = dq[0] + (b * T + t) * ld, *q1 = dq[1] + (b * T + t) * ld;
            for (int64_t e = 0; e < ld; e++) {
                ok &= t < nq ? memcmp(o0 + e, o1 + e, 4) == 0 && memcmp(q0 + e, q1 + e, 4) == 0
                             : o1[e] == 0 && q1[e] == 0;
            }
            for (int64_t h = 0; h < H; h++) {
                float a = l[0][(b * H + h) * T + t], z = l[1][(b * H + h) * T + t];
                ok &= t < nq ? memcmp(&a, &z, 4) == 0 : z == -INFINITY;
            }
        }
    ok &= memcmp(dk[0], dk[1], 4 * n) == 0 && memcmp(dv[0], dv[1], 4 * n) == 0 && memcmp(dt[0], dt[1], 4 * 8 * H) == 0;
    CHECK(ok, "%s B=%lld T=%lld H=%lld D=%lld rel=%d window=%d p=%g: query_rows %lld differs from the whole call",
          half ? "bf16" : "f32", (long long)B, (long long)T, (long long)H, (long long)D, v->rel, v->win, (double)v->p,
          (long long)nq);
    for (int r = 0; r < 2; r++) { free(o[r]); free(l[r]); free(dq[r]); free(dk[r]); free(dv[r]); free(dt[r]); }
    free(g); free(g0); free(tab);
    case_free(&c);
    return ok;
}

static void test_attention_query_rows_are_the_whole_calls_rows(void)
{
    static const qr_variant vars[] = { { 0, 0, 0 }, { 0, 0, 0.2f }, { 1, 0, 0.1f }, { 0, 9, 0 }, { 0, 9, 0.1f } };
    static const int64_t shapes[][4] = { { 2, 7, 2, 32 }, { 2, 70, 3, 16 }, { 1, 130, 2, 32 } };   /* B, T, H, D */
    static const int64_t nqs[] = { 1, 5, 64, 65 };
    oc_seed(38);
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++)
            for (int half = 0; half < 2; half++)
                for (size_t i = 0; i < sizeof nqs / sizeof nqs[0] && bad < 3; i++)
                    if (nqs[i] < shapes[s][1])
                        bad += !qr_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], &vars[v], half,
                                        nqs[i]);
}

int main(void)
{
    RUN(test_attention_forward_matches_naive);
    RUN(test_attention_fully_masked_rows_are_zero_not_nan);
    RUN(test_attention_f32_matches_f64_and_f32_mask);
    RUN(test_attention_independent_of_thread_count);
    RUN(test_attention_f32_every_path_matches_f64);
    RUN(test_attention_f32_independent_of_thread_count);
    RUN(test_attention_short_rows_match_f64);
    RUN(test_attention_query_rows_are_the_whole_calls_rows);
    return check_done();
}
