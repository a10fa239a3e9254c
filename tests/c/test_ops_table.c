/* test_ops_table.c — one table-driven test over the op table (core/ops/op_table.h), in the
 * spirit of ggml's test-backend-ops. For every op of the table x dtypes (f32, bf16, f16)
 * x shapes (odd sizes, size 1, masks and ignored targets):
 *   - the CPU slot's outputs against a float64 reference (the kernels' _f64 instance, or
 *     the formula), with per-dtype tolerances; half runs use inputs rounded to the half
 *     dtype, so the reference sees exactly what the op sees;
 *   - a backward op against float64 central finite differences of its forward's
 *     reference (L = sum dout * out), accumulating gradients (+=) from a random start;
 *   - outputs start as NaN (an op that reads an output it should only write fails);
 *     guard sentinels around every tensor's data; inputs must come back unchanged;
 *   - the CUDA backend, with --cuda (tests/gpu/run.sh, from the GPU bundle): every op's
 *     CUDA slot on every present device, the same cases copied there with
 *     tr_tensor_copy, against the CPU slot's outputs (normalised mean-square error, 1e-7
 *     in f32 and 1e-4 in half; the dropout ops bit for bit), one PASS/FAIL line per op,
 *     dtype and shape with the error figures; without a GPU one SKIP line per op, and in
 *     the normal run one SKIP line per op (never a pass).
 * It asserts that it covered every op in the table (iterating the table) and prints the
 * count. Checks the table does not express (argument errors and their messages,
 * workspace bounds on big tensors, dropout regeneration) stay in test_ops_elem.c and
 * test_ops_nn.c. */
#include "check.h"
#include "op_check.h"

#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/dropout_add_layernorm.h"
#include "cpu/embedding.h"
#include "cpu/pair_features.h"
#include "cpu/bias_gelu.h"
#include "cpu/geglu.h"
#include "cpu/activation.h"
#include "cpu/rotary.h"
#include "cpu/layernorm.h"
#include "cpu/loss.h"
#include "cpu/matmul.h"
#include "cpu/optim.h"
#include "cpu/pooling.h"
#include "cpu/reduce.h"
#include "cpu/score_loss.h"
#include "cpu/similarity.h"
#include "cpu/softmax.h"
#include "op_table.h"
#include "trainer.h"

#include <stdio.h>
#include <string.h>

static tr_ctx *ctx;

enum { NT = TR_OP_MAX_TENSORS };

/* ------------------------------------------------------------ case descriptions */

/* How an argument's values are drawn. */
enum { RND, POS, IDS, TGT, MASK, PADROW, VAL };   /* PADROW: RND with the last row all zero; VAL: range */

typedef struct arg_spec {
    int ndim;            /* < 0: the argument is NULL in this case */
    int64_t shape[4];
    int fill;
    int64_t range;       /* IDS, TGT: values in [0, range); VAL: every value */
    int dtype;           /* 0: by the description's rule; else the tr_dtype + 1 */
} arg_spec;

/* f64 reference: computes the OUT and ACC arrays of t in place from the IN arrays. */
typedef void (*ref_fn)(double **t, const int64_t *d, const tr_op_call *c);

/* Backward maps: what each argument of a backward op is in terms of its forward. */
#define G(j) (100 + (j))  /* the gradient of forward input j */
#define D(j) (200 + (j))  /* the incoming gradient of forward output j */
#define I(j) (300 + (j))  /* forward input j itself */
#define S(j) (400 + (j))  /* forward output j, saved by the forward */

typedef struct op_case {
    const char *op;
    void (*shapes)(const int64_t *d, arg_spec *a);
    void (*scalars)(const int64_t *d, tr_op_call *c);   /* NULL: none */
    ref_fn ref;                                         /* NULL: backward, checked by finite differences */
    const char *fwd;                                    /* backward: its forward op */
    int map[NT];
    int scalar_dout;                                    /* the incoming gradient is c->f[1] on output 0 */
    int nd;
    int64_t dims[10][9];
    double tol;                                         /* multiplies the per-dtype tolerance; 0 means 1 */
    void (*custom)(int dtype, int device);              /* ops over tensor lists (device: see there) */
    ref_fn fd_ref;                                      /* the smooth reference finite differences
                                                           differentiate (NULL: ref, when ref rounds
                                                           intermediates as the op does) */
    int rounds_inside;                                  /* 1: the op rounds intermediates to the half dtype
                                                           under test (as the unfused ops it fuses do), so
                                                           its f32 outputs are held to that dtype's tolerance */
} op_case;

#define A(n, ...) ((arg_spec){ n, { __VA_ARGS__ }, RND, 0, 0 })
#define ANULL ((arg_spec){ -1, { 0 }, RND, 0, 0 })

static int64_t numel_of(const arg_spec *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

/* ------------------------------------------------------------ references: elementwise */

static void sh_binary(const int64_t *d, arg_spec *a)   /* d: N, C, b broadcast */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[1]);
    a[2] = d[2] ? A(1, d[1]) : A(2, d[0], d[1]);
}
static void ref_add(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_add_fwd_f64(t[0], t[1], t[2], d[0], d[1], d[2] ? 1 : d[0]);
}
static void ref_mul(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_mul_fwd_f64(t[0], t[1], t[2], d[0], d[1], d[2] ? 1 : d[0]);
}
static void sh_mul_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = d[2] ? A(1, d[1]) : A(2, d[0], d[1]);
    a[2] = A(2, d[0], d[1]);
    a[3] = A(2, d[0], d[1]);
    a[4] = a[1];
}
static void sh_unary(const int64_t *d, arg_spec *a)   /* d: N, C */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[1]);
}
static void sh_unary_bwd(const int64_t *d, arg_spec *a)
{
    sh_unary(d, a);
    a[2] = A(2, d[0], d[1]);
}
static void sc_alpha(const int64_t *d, tr_op_call *c) { c->f[0] = -1.75f; }
static void ref_scale(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_scale_fwd_f64(t[0], t[1], c->f[0], d[0] * d[1]);
}
static void ref_axpy(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_axpy_fwd_f64(t[0], t[1], c->f[0], d[0] * d[1]);
}
static void sh_fill(const int64_t *d, arg_spec *a) { a[0] = A(2, d[0], d[1]); }
static void ref_fill(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_fill_fwd_f64(t[0], c->f[0], d[0] * d[1]);
}

/* ------------------------------------------------------------ embedding, dropout */

static void sh_embedding(const int64_t *d, arg_spec *a)   /* d: N, C, V */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = (arg_spec){ 1, { d[0] }, IDS, d[2], 0 };
    a[2] = A(2, d[2], d[1]);
}
static void ids64(int64_t *dst, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = (int64_t)src[i];
}
static void ref_embedding(double **t, const int64_t *d, const tr_op_call *c)
{
    int64_t ids[64];
    ids64(ids, t[1], d[0]);
    tr_k_embedding_fwd_f64(t[0], ids, t[2], d[0], d[1]);
}
static void sh_embedding_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[2], d[1]);
    a[1] = A(2, d[0], d[1]);
    a[2] = (arg_spec){ 1, { d[0] }, IDS, d[2], 0 };
}
static void sc_no_padding(const int64_t *d, tr_op_call *c) { c->i[0] = -1; }

static const tr_rng_key drop_key = { 7, 3, 2, 1 };
static void sc_dropout(const int64_t *d, tr_op_call *c)
{
    c->f[0] = (float)d[2] / 100.0f;
    c->p = &drop_key;
    c->u = 1000;
}
static void ref_dropout(double **t, const int64_t *d, const tr_op_call *c)
{
    int64_t n = d[0] * d[1];
    uint8_t keep[4096];
    float p = c->f[0];
    if (p > 0) tr_dropout_mask_bits(keep, (size_t)n, p, *(const tr_rng_key *)c->p, c->u);
    for (int64_t i = 0; i < n; i++) t[0][i] = p == 0 ? t[1][i] : keep[i] ? t[1][i] / (1.0 - p) : 0.0;
}

/* ------------------------------------------------------------ cross-entropy */

static void sh_ce(const int64_t *d, arg_spec *a)   /* d: N, K, ignored row (1) */
{
    a[0] = A(1, 1);
    a[1] = A(1, d[0]);
    a[2] = A(2, d[0], d[1]);
    a[3] = (arg_spec){ 1, { d[0] }, d[2] ? TGT : IDS, d[1], 0 };
    a[2].fill = POS;   /* logits spread over a few units */
}
static void sc_ce(const int64_t *d, tr_op_call *c)
{
    c->i[0] = -100;
    c->f[0] = 0.1f;
    c->f[1] = 1.5f;   /* the backward's dloss */
}
static void ref_ce(double **t, const int64_t *d, const tr_op_call *c)
{
    int64_t tg[64];
    double losses[64];
    ids64(tg, t[3], d[0]);
    int64_t cnt = tr_k_cross_entropy_fwd_f64(losses, t[1], t[2], tg, d[0], d[1], c->i[0], c->f[0]);
    double s = 0;
    for (int64_t n = 0; n < d[0]; n++) s += losses[n];
    t[0][0] = cnt ? s / (double)cnt : 0;
}
/* A backward's shapes picked from its forward's: a[i] = the forward's argument pick[i]. */
static void pick_fwd(void (*fwd)(const int64_t *, arg_spec *), const int64_t *d, arg_spec *a, const int *pick, int n)
{
    arg_spec f[NT];
    for (int i = 0; i < NT; i++) f[i] = ANULL;
    fwd(d, f);
    for (int i = 0; i < n; i++) a[i] = f[pick[i]];
}
static void sh_ce_bwd(const int64_t *d, arg_spec *a) { pick_fwd(sh_ce, d, a, (const int[]){ 2, 2, 1, 3 }, 4); }

/* ------------------------------------------------------------ pooling, similarity, reductions */

static void sh_pool(const int64_t *d, arg_spec *a)   /* d: B, T, C, mode, masked */
{
    a[0] = A(2, d[0], d[2]);
    a[1] = A(3, d[0], d[1], d[2]);
    a[2] = d[4] ? (arg_spec){ 2, { d[0], d[1] }, MASK, 0, 0 } : ANULL;
}
static void sc_pool(const int64_t *d, tr_op_call *c) { c->i[0] = d[3]; }
static void mask32(int32_t *m, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) m[i] = src ? (int32_t)src[i] : 1;
}
static void ref_pool(double **t, const int64_t *d, const tr_op_call *c)
{
    int32_t m[256];
    mask32(m, t[2], d[0] * d[1]);
    tr_k_pool_fwd_f64(t[0], t[1], m, d[0], d[1], d[2], (int)c->i[0]);
}
static void sh_pool_bwd(const int64_t *d, arg_spec *a) { pick_fwd(sh_pool, d, a, (const int[]){ 1, 0, 1, 2 }, 4); }

static void sc_eps(const int64_t *d, tr_op_call *c) { c->f[0] = 1e-12f; }
static void ref_l2norm(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_l2norm_fwd_f64(t[0], t[1], d[0], d[1], c->f[0]);
}

static void sh_cos(const int64_t *d, arg_spec *a)   /* d: N, M, C */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[2]);
    a[2] = A(2, d[1], d[2]);
}
static void ref_cos(double **t, const int64_t *d, const tr_op_call *c)
{
    double an[256], bn[256];
    tr_k_l2norm_fwd_f64(an, t[1], d[0], d[2], 1e-12);
    tr_k_l2norm_fwd_f64(bn, t[2], d[1], d[2], 1e-12);
    tr_k_cosine_sim_fwd_f64(t[0], an, bn, d[0], d[1], d[2]);
}
static void sh_cos_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[2]);
    a[1] = A(2, d[1], d[2]);
    a[2] = A(2, d[0], d[1]);
    a[3] = A(2, d[0], d[2]);
    a[4] = A(2, d[1], d[2]);
}

static void sh_reduce(const int64_t *d, arg_spec *a)   /* d: N, C, lastdim */
{
    a[0] = d[2] ? A(1, d[0]) : A(1, 1);
    a[1] = A(2, d[0], d[1]);
}
static void sc_lastdim(const int64_t *d, tr_op_call *c) { c->i[0] = d[2]; }
static void ref_sum(double **t, const int64_t *d, const tr_op_call *c)
{
    if (c->i[0]) tr_k_sum_lastdim_fwd_f64(t[0], t[1], d[0], d[1]);
    else t[0][0] = tr_k_sum_all_fwd_f64(t[1], d[0] * d[1]);
}
static void ref_mean(double **t, const int64_t *d, const tr_op_call *c)
{
    ref_sum(t, d, c);
    int64_t n = c->i[0] ? d[0] : 1;
    for (int64_t i = 0; i < n; i++) t[0][i] /= (double)(c->i[0] ? d[1] : d[0] * d[1]);
}

static void sh_cast(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[1]);
    a[1].dtype = TR_F32 + 1;   /* from f32 into the dtype under test */
}
static void ref_copy(double **t, const int64_t *d, const tr_op_call *c)
{
    memcpy(t[0], t[1], (size_t)(d[0] * d[1]) * sizeof(double));
}

/* ------------------------------------------------------------ optimizers */

static void sh_adamw(const int64_t *d, arg_spec *a)   /* d: n */
{
    a[0] = A(1, d[0]);
    a[1] = A(1, d[0]);
    a[2] = A(1, d[0]);
    a[3] = (arg_spec){ 1, { d[0] }, POS, 0, 0 };
    a[4] = ANULL;
}
static void sc_adamw(const int64_t *d, tr_op_call *c)
{
    float f[] = { 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 2.0f };
    memcpy(c->f, f, sizeof f);
    c->i[0] = 3;
}
static void ref_adamw(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_adamw_step_f64(t[0], t[2], t[3], t[1], d[0], c->f[0], c->f[1], c->f[2], c->f[3], c->f[4], c->i[0], c->f[5]);
}
/* The optimizer steps' skip arguments from a case's dims: flag < 0 no skip_if, else an i32
 * flag of that value; count < 0 no skip count, else an i32 skip count of that value. */
static void sh_skip_args(int64_t flag, int64_t count, arg_spec *skip_if, arg_spec *skipped)
{
    *skip_if = flag < 0 ? ANULL : (arg_spec){ 1, { 1 }, VAL, flag, TR_I32 + 1 };
    *skipped = count < 0 ? ANULL : (arg_spec){ 1, { 1 }, VAL, count, TR_I32 + 1 };
}
/* Whether the reference skips (the flag's host value is set), and the step it uses: the
 * host's step less the skips it has not read (count - known). */
static int ref_skip(const double *flag, const double *count, int64_t step, int64_t known, int64_t *eff)
{
    *eff = count ? step - ((int64_t)count[0] - known) : step;
    return flag && flag[0] != 0;
}

/* The half copy's reference: the new param, unless the step was skipped. */
static void ref_half(double *half, const double *param, int64_t n)
{
    if (half) memcpy(half, param, sizeof(double) * (size_t)n);
}

/* d: n, nesterov, flag, skip count, known skips, step (see sh_skip_args), half copy */
static void sh_sgd(const int64_t *d, arg_spec *a)
{
    a[0] = A(1, d[0]);
    a[1] = A(1, d[0]);
    a[2] = A(1, d[0]);
    a[3] = d[6] ? A(1, d[0]) : ANULL;
    sh_skip_args(d[2], d[3], &a[4], &a[5]);
}
static void sc_sgd(const int64_t *d, tr_op_call *c)
{
    float f[] = { 0.05f, 0.9f, 0.1f, 0.01f, 1.0f };
    memcpy(c->f, f, sizeof f);
    c->i[0] = d[1];   /* nesterov, which torch allows only without dampening */
    if (d[1]) c->f[2] = 0;
    c->i[1] = d[5];
    c->i[2] = d[4];
}
static void ref_sgd(double **t, const int64_t *d, const tr_op_call *c)
{
    int64_t step;
    if (ref_skip(t[4], t[5], c->i[1], c->i[2], &step)) return;
    tr_k_sgd_step_f64(t[0], t[2], t[1], d[0], c->f[0], c->f[1], c->f[2], c->f[3], (int)c->i[0], step == 1, c->f[4]);
    ref_half(t[3], t[0], d[0]);
}
static const tr_adafactor_config ada_cfg = { 0, 1e-30f, 1e-3f, 1.0f, -0.8f, 0.9f, 0.01f, 1, 1, 0 };
/* warmup_init: the relative step size grows with the step (1e-6 t), so a wrong step shows */
static const tr_adafactor_config ada_cfg_warmup = { 0, 1e-30f, 1e-3f, 1.0f, -0.8f, 0.9f, 0.01f, 1, 1, 1 };
/* d: R, C (C = 0: a vector of R), flag, skip count, known skips, step, warmup_init, half copy */
static void sh_adafactor(const int64_t *d, arg_spec *a)
{
    int fac = d[1] > 0;
    a[0] = fac ? A(2, d[0], d[1]) : A(1, d[0]);
    a[1] = a[0];
    a[2] = a[0];
    a[3] = fac ? (arg_spec){ 1, { d[0] }, POS, 0, 0 } : ANULL;
    a[4] = fac ? (arg_spec){ 1, { d[1] }, POS, 0, 0 } : ANULL;
    a[5] = fac ? ANULL : (arg_spec){ 1, { d[0] }, POS, 0, 0 };
    a[6] = d[7] ? a[0] : ANULL;
    sh_skip_args(d[2], d[3], &a[7], &a[8]);
}
static float ada_lr;
static void sc_adafactor(const int64_t *d, tr_op_call *c)
{
    c->p = d[6] ? &ada_cfg_warmup : &ada_cfg;
    c->i[0] = d[5];
    c->i[1] = d[4];
    c->f[0] = 1.0f;
    c->res = &ada_lr;
}
static void ref_adafactor(double **t, const int64_t *d, const tr_op_call *c)
{
    const tr_adafactor_config *g = c->p;
    int64_t step;
    if (ref_skip(t[7], t[8], c->i[0], c->i[1], &step)) return;
    adafactor_hparams hp = { .lr = g->lr, .eps1 = g->eps1, .eps2 = g->eps2, .clip_threshold = g->clip_threshold,
                             .decay_rate = g->decay_rate, .beta1 = g->beta1, .weight_decay = g->weight_decay,
                             .relative_step = g->relative_step, .scale_parameter = g->scale_parameter,
                             .warmup_init = g->warmup_init, .step = step, .grad_scale = c->f[0] };
    int fac = d[1] > 0;
    int64_t R = fac ? d[0] : 1, C = fac ? d[1] : d[0];
    double work[256];
    tr_k_adafactor_step_f64(t[0], t[2], fac ? t[3] : NULL, fac ? t[4] : NULL, fac ? NULL : t[5], work, t[1], 1, R, C,
                            &hp);
    ref_half(t[6], t[0], R * C);
}

/* ------------------------------------------------------------ feature columns */

static void sh_copy_cols(const int64_t *d, arg_spec *a)   /* d: N, dst C, src C, ncols, dst_col, src_col */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[2]);
}
static void sc_copy_cols(const int64_t *d, tr_op_call *c)
{
    c->i[0] = d[4];
    c->i[1] = d[5];
    c->i[2] = d[3];
    c->i[3] = d[0] % 2;   /* odd row counts accumulate */
}
static void ref_copy_cols(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_copy_cols_fwd_f64(t[0], t[1], d[0], d[1], c->i[0], d[2], c->i[1], c->i[2], (int)c->i[3]);
}
static void ref_abs_diff(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_abs_diff_fwd_f64(t[0], t[1], t[2], d[0] * d[1]);
}
static void sh_abs_diff_bwd(const int64_t *d, arg_spec *a)
{
    for (int i = 0; i < 5; i++) a[i] = A(2, d[0], d[1]);
}

/* ------------------------------------------------------------ scored-pair losses */

/* gold scores of up to 8 pairs, with a tie (pairs 1 and 4) */
static const float pair_scores[8] = { 0.5f, 3.0f, 1.5f, 4.5f, 3.0f, 0.0f, 2.0f, 5.0f };

static void sh_score_loss(const int64_t *d, arg_spec *a)   /* d: B */
{
    a[0] = A(1, 1);
    a[1] = A(2, d[0], d[0]);
    a[2] = A(2, d[0], d[0]);
}
static void sc_cosent(const int64_t *d, tr_op_call *c)
{
    (void)d;
    c->p = pair_scores;
    c->f[0] = 20.0f;
}
static void sc_cosine_mse(const int64_t *d, tr_op_call *c)
{
    (void)d;
    c->p = pair_scores;
    c->f[0] = 5.0f;
}
/* the op's definition on sim's diagonal: the _f64 kernel, dsim zero off the diagonal */
static void ref_score_loss(double **t, const int64_t *d, const tr_op_call *c, int kind)
{
    const int64_t B = d[0];
    double cos[8], y[8], dcos[8];
    for (int64_t i = 0; i < B; i++) {
        cos[i] = t[2][i * B + i];
        y[i] = ((const float *)c->p)[i];
    }
    if (kind) tr_k_cosine_mse_loss_f64(t[0], dcos, cos, y, c->f[0], B);
    else tr_k_cosent_loss_f64(t[0], dcos, cos, y, c->f[0], B);
    for (int64_t i = 0; i < B * B; i++) t[1][i] = 0;
    for (int64_t i = 0; i < B; i++) t[1][i * B + i] = dcos[i];
}
static void ref_cosent(double **t, const int64_t *d, const tr_op_call *c) { ref_score_loss(t, d, c, 0); }
static void ref_cosine_mse(double **t, const int64_t *d, const tr_op_call *c) { ref_score_loss(t, d, c, 1); }

/* ------------------------------------------------------------ matmul, linear, layernorm */

static void sh_matmul(const int64_t *d, arg_spec *a)   /* d: batch (0: none), M, K, N, trans_a, trans_b */
{
    int64_t M = d[1], K = d[2], N = d[3];
    if (d[0]) {
        a[0] = A(3, d[0], M, N);
        a[1] = d[4] ? A(3, d[0], K, M) : A(3, d[0], M, K);
    } else {
        a[0] = A(2, M, N);
        a[1] = d[4] ? A(2, K, M) : A(2, M, K);
    }
    a[2] = d[5] ? A(2, N, K) : A(2, K, N);   /* shared by the batch */
    a[3] = d[4] ? ANULL : A(1, N);
}
static void sc_matmul(const int64_t *d, tr_op_call *c)
{
    c->i[0] = d[4];
    c->i[1] = d[5];
    c->f[0] = 0.75f;
    c->f[1] = d[4] ? 0.0f : 0.5f;   /* beta 0 must never read out (it starts as NaN then) */
}
static void ref_matmul(double **t, const int64_t *d, const tr_op_call *c)
{
    int64_t B = d[0] ? d[0] : 1, M = d[1], K = d[2], N = d[3];
    tr_error err = { 0 };
    tr_k_matmul_fwd_f64(t[0], t[1], t[2], t[3], (int)B, (int)M, (int)N, (int)K, (int)c->i[0], (int)c->i[1], c->f[0],
                        c->f[1], M * K, 0, M * N, &err);
}
/* matmul's out is ACC (beta reads it) except when beta is 0: then it starts as NaN. */

static void sh_linear(const int64_t *d, arg_spec *a)   /* d: N, I, O, bias */
{
    a[0] = A(2, d[0], d[2]);
    a[1] = A(2, d[0], d[1]);
    a[2] = A(2, d[2], d[1]);
    a[3] = d[3] ? A(1, d[2]) : ANULL;
}
static void ref_linear(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_error err = { 0 };
    tr_k_matmul_fwd_f64(t[0], t[1], t[2], t[3], 1, (int)d[0], (int)d[2], (int)d[1], 0, 1, 1, 0, 0, 0, 0, &err);
}
static void sh_linear_bwd(const int64_t *d, arg_spec *a)   /* d: N, I, O, bias, frozen (no dw, no x) */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = d[4] ? ANULL : A(2, d[2], d[1]);
    a[2] = d[3] ? A(1, d[2]) : ANULL;
    a[3] = A(2, d[0], d[2]);
    a[4] = d[4] ? ANULL : A(2, d[0], d[1]);
    a[5] = A(2, d[2], d[1]);
}

static void sh_layernorm(const int64_t *d, arg_spec *a)   /* d: N, C, bias */
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(1, d[0]);
    a[2] = A(1, d[0]);
    a[3] = A(2, d[0], d[1]);
    a[4] = A(1, d[1]);
    a[5] = d[2] ? A(1, d[1]) : ANULL;
}
static void sc_ln(const int64_t *d, tr_op_call *c) { c->f[0] = 1e-5f; }
static void ref_layernorm(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_layernorm_fwd_f64(t[0], t[1], t[2], t[3], t[4], t[5], d[0], d[1], c->f[0]);
}
static void sh_layernorm_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(1, d[1]);
    a[2] = d[2] ? A(1, d[1]) : ANULL;
    a[3] = A(2, d[0], d[1]);
    a[4] = A(2, d[0], d[1]);
    a[5] = A(1, d[1]);
    a[6] = A(1, d[0]);
    a[7] = A(1, d[0]);
}

static void quantize(double *x, int64_t n, int dt);

/* dropout_add_layernorm. d: N, C, bias, p in percent, padded (the last row of x and of
 * the residual all zero, as a padded token's row: a constant row, var 0), no statistics (sum,
 * mean and rstd NULL: a forward no backward follows). */
static void sh_dal(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[1]);
    a[2] = A(1, d[0]);
    a[3] = A(1, d[0]);
    a[4] = A(2, d[0], d[1]);
    a[5] = A(2, d[0], d[1]);
    a[6] = A(1, d[1]);
    a[7] = d[2] ? A(1, d[1]) : ANULL;
    if (d[4]) a[4].fill = a[5].fill = PADROW;
    if (d[5]) a[1] = a[2] = a[3] = ANULL;
}
static void sc_dal(const int64_t *d, tr_op_call *c)
{
    c->f[0] = (float)d[3] / 100.0f;
    c->f[1] = 1e-5f;
    c->p = &drop_key;
    c->u = 1000;
}
/* Without rounding: what finite differences differentiate. */
static void ref_dal_smooth_with(double **t, const int64_t *d, const tr_op_call *c);
static void ref_dal_with(double **t, const int64_t *d, const tr_op_call *c);
/* t with scratch arrays for sum, mean and rstd where the case has none, then ref. */
static void ref_dal_stats(double **t, const int64_t *d, const tr_op_call *c,
                          void (*ref)(double **, const int64_t *, const tr_op_call *))
{
    if (t[1]) {
        ref(t, d, c);
        return;
    }
    double *tt[NT];
    memcpy(tt, t, sizeof tt);
    tt[1] = malloc((size_t)(d[0] * d[1]) * sizeof(double) + 8);
    tt[2] = malloc((size_t)d[0] * sizeof(double) + 8);
    tt[3] = malloc((size_t)d[0] * sizeof(double) + 8);
    ref(tt, d, c);
    free(tt[1]);
    free(tt[2]);
    free(tt[3]);
}
static void ref_dal_smooth(double **t, const int64_t *d, const tr_op_call *c)
{
    ref_dal_stats(t, d, c, ref_dal_smooth_with);
}
static void ref_dal(double **t, const int64_t *d, const tr_op_call *c)
{
    ref_dal_stats(t, d, c, ref_dal_with);
}
static void ref_dal_smooth_with(double **t, const int64_t *d, const tr_op_call *c)
{
    int64_t n = d[0] * d[1];
    uint8_t *keep = malloc((size_t)n + 1);   /* the device-only cases are BERT-sized */
    float p = c->f[0];
    if (p > 0) tr_dropout_mask_bits(keep, (size_t)n, p, *(const tr_rng_key *)c->p, c->u);
    tr_k_dropout_add_layernorm_fwd_f64(t[0], t[1], t[2], t[3], t[4], t[5], p > 0 ? keep : NULL,
                                       p > 0 ? 1.0 / (1.0 - p) : 1.0, t[6], t[7], d[0], d[1], c->f[1]);
    free(keep);
}
/* As the op computes it: in half, the dropped-out x rounded to x's dtype and the sum to sum's
 * (so the saved sum, mean and rstd a backward case reads agree with each other). */
static void ref_dal_with(double **t, const int64_t *d, const tr_op_call *c)
{
    int xdt = c->t[4]->dtype, sdt = c->t[1] ? c->t[1]->dtype : xdt;
    if (xdt == TR_F32 && sdt == TR_F32) {
        ref_dal_smooth_with(t, d, c);
        return;
    }
    int64_t n = d[0] * d[1];
    uint8_t *keep = malloc((size_t)n + 1);
    float p = c->f[0];
    if (p > 0) tr_dropout_mask_bits(keep, (size_t)n, p, *(const tr_rng_key *)c->p, c->u);
    for (int64_t i = 0; i < n; i++) t[1][i] = p > 0 ? (keep[i] ? t[4][i] / (1.0 - p) : 0.0) : t[4][i];
    free(keep);
    if (xdt != TR_F32) quantize(t[1], n, xdt);
    for (int64_t i = 0; i < n; i++) t[1][i] += t[5][i];
    if (sdt != TR_F32) quantize(t[1], n, sdt);
    tr_k_layernorm_fwd_f64(t[0], t[2], t[3], t[1], t[6], t[7], d[0], d[1], c->f[1]);
}
/* dx, then the arguments of layernorm_backward, in its order and shapes. */
static void sh_dal_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    sh_layernorm_bwd(d, a + 1);
}

/* bias_gelu. d: N, I, bias, kind (0 erf, 1 tanh). */
static void sh_bias_gelu(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], d[1]);
    a[2] = d[2] ? A(1, d[1]) : ANULL;
}
static void sc_bias_gelu(const int64_t *d, tr_op_call *c) { c->i[0] = d[3]; }
static void ref_bias_gelu(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_bias_gelu_fwd_f64(t[0], t[1], t[2], d[0], d[1], c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF);
}
static void sh_bias_gelu_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = d[2] ? A(1, d[1]) : ANULL;
    a[2] = A(2, d[0], d[1]);
    a[3] = A(2, d[0], d[1]);
}

/* linear_gelu. d: N, I, O, bias, kind (0 erf, 1 tanh). */
static void sh_linear_gelu(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[2]);
    sh_linear(d, a + 1);
}
static void sc_linear_gelu(const int64_t *d, tr_op_call *c) { c->i[0] = d[4]; }
static void ref_linear_gelu(double **t, const int64_t *d, const tr_op_call *c)
{
    ref_linear(t + 1, d, c);
    tr_k_gelu_fwd_f64(t[0], t[1], d[0] * d[2], c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF);
}

/* linear_backward_dgelu. d: N, I, O, grads (dw, dbias, dhbias and x, or none), kind. */
static void sh_linear_bwd_dgelu(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = d[3] ? A(2, d[2], d[1]) : ANULL;
    a[2] = d[3] ? A(1, d[2]) : ANULL;
    a[3] = d[3] ? A(1, d[1]) : ANULL;
    a[4] = A(2, d[0], d[2]);
    a[5] = d[3] ? A(2, d[0], d[1]) : ANULL;
    a[6] = A(2, d[2], d[1]);
    a[7] = A(2, d[0], d[1]);
}
static void ref_linear_bwd_dgelu(double **t, const int64_t *d, const tr_op_call *c)
{
    const int64_t N = d[0], I = d[1], O = d[2];
    double *dh = t[0], *dw = t[1], *dbias = t[2], *dhbias = t[3], *dout = t[4], *x = t[5], *w = t[6], *h = t[7];
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < I; i++) {
            double acc = 0;
            for (int64_t o = 0; o < O; o++) acc += dout[n * O + o] * w[o * I + i];
            dh[n * I + i] = acc;
        }
    tr_k_gelu_bwd_f64(dh, dh, h, N * I, c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF);
    for (int64_t o = 0; dw && o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t n = 0; n < N; n++) dw[o * I + i] += dout[n * O + o] * x[n * I + i];
    for (int64_t n = 0; n < N; n++) {
        for (int64_t o = 0; dbias && o < O; o++) dbias[o] += dout[n * O + o];
        for (int64_t i = 0; dhbias && i < I; i++) dhbias[i] += dh[n * I + i];
    }
}

/* dropout_linear. d: N, I, R, p in percent, which gradients the backward wants (1 dx, 2 dw). */
static void sh_dl(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[2]);
    a[1] = A(2, d[0], d[1]);
    a[2] = A(2, d[2], d[1]);
}
static void sc_dl(const int64_t *d, tr_op_call *c)
{
    c->f[0] = (float)d[3] / 100.0f;
    c->p = &drop_key;
    c->u = 1000;
}
/* xd = dropout(x) as the op's dropout stores it (rounded to x's dtype dt). */
static double *dl_dropped(const double *x, int64_t n, const tr_op_call *c, int dt)
{
    double *xd = malloc((size_t)n * sizeof *xd + 1);
    uint8_t *keep = malloc((size_t)n + 1);
    const float p = c->f[0];
    if (p > 0) tr_dropout_mask_bits(keep, (size_t)n, p, *(const tr_rng_key *)c->p, c->u);
    for (int64_t i = 0; i < n; i++) xd[i] = p > 0 ? (keep[i] ? x[i] / (1.0 - p) : 0.0) : x[i];
    if (dt != TR_F32) quantize(xd, n, dt);
    free(keep);
    return xd;
}
static void ref_dl(double **t, const int64_t *d, const tr_op_call *c)
{
    const int64_t N = d[0], I = d[1], R = d[2];
    double *xd = dl_dropped(t[1], N * I, c, c->t[1]->dtype);
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < R; j++) {
            double acc = 0;
            for (int64_t i = 0; i < I; i++) acc += xd[n * I + i] * t[2][j * I + i];
            t[0][n * R + j] = acc;
        }
    free(xd);
}
static void sh_dl_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = d[4] & 1 ? A(2, d[0], d[1]) : ANULL;
    a[1] = d[4] & 2 ? A(2, d[2], d[1]) : ANULL;
    a[2] = A(2, d[0], d[2]);
    a[3] = A(2, d[0], d[1]);
    a[4] = A(2, d[2], d[1]);
}
/* dx += dropout_backward(dout w) (the product and its mask in dout's dtype), dw += dout^T xd */
static void ref_dl_bwd(double **t, const int64_t *d, const tr_op_call *c)
{
    const int64_t N = d[0], I = d[1], R = d[2];
    double *dx = t[0], *dw = t[1], *dout = t[2], *x = t[3], *w = t[4];
    const int ddt = c->t[2]->dtype;
    if (dx) {
        double *g = malloc((size_t)(N * I) * sizeof *g + 1);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < I; i++) {
                double acc = 0;
                for (int64_t j = 0; j < R; j++) acc += dout[n * R + j] * w[j * I + i];
                g[n * I + i] = acc;
            }
        if (ddt != TR_F32) quantize(g, N * I, ddt);
        double *gd = dl_dropped(g, N * I, c, ddt);
        for (int64_t e = 0; e < N * I; e++) dx[e] += gd[e];
        free(gd);
        free(g);
    }
    if (dw) {
        double *xd = dl_dropped(x, N * I, c, c->t[3]->dtype);
        for (int64_t j = 0; j < R; j++)
            for (int64_t i = 0; i < I; i++)
                for (int64_t n = 0; n < N; n++) dw[j * I + i] += dout[n * R + j] * xd[n * I + i];
        free(xd);
    }
}

/* ------------------------------------------------------------ activations, attention */

static void sc_gelu(const int64_t *d, tr_op_call *c) { c->i[0] = d[2]; }
static void ref_gelu(double **t, const int64_t *d, const tr_op_call *c)
{
    int form = c->i[0] == TR_OP_ACT_RELU ? TR_GELU_RELU : c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
    tr_k_gelu_fwd_f64(t[0], t[1], d[0] * d[1], form);
}
static void ref_softmax(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_softmax_fwd_f64(t[0], t[1], d[0], d[1]);
}
static void ref_tanh(double **t, const int64_t *d, const tr_op_call *c) { tr_k_tanh_fwd_f64(t[0], t[1], d[0] * d[1]); }

/* The relative-position bias of attention case d (d[6]: 0 none; 1 bidirectional, 8 buckets,
 * max_distance 5; 2 one-directional, 6 buckets, max_distance 4): at these T every kind of
 * bucket occurs (exact, logarithmic, beyond max_distance, and both sides). */
static int64_t attn_rel_buckets(const int64_t *d) { return d[6] == 1 ? 8 : d[6] == 2 ? 6 : 0; }

static void sh_attention(const int64_t *d, arg_spec *a)   /* d: B, T, H, D, masked, -, bias, window, query rows */
{
    for (int i = 0; i < 5; i++) a[i] = A(4, d[0], d[1], d[2], d[3]);
    a[1] = A(3, d[0], d[2], d[1]);
    a[5] = d[4] ? (arg_spec){ 2, { d[0], d[1] }, MASK, 0, TR_I32 + 1 } : ANULL;
    a[6] = d[6] ? A(2, attn_rel_buckets(d), d[2]) : ANULL;
}
static void sc_attention(const int64_t *d, tr_op_call *c)
{
    c->f[0] = 0;   /* 1/sqrt(D) */
    c->f[1] = 0;
    c->i[0] = d[6] == 1 ? 5 : d[6] == 2 ? 4 : 0;   /* max_distance */
    c->i[1] = d[6] == 1;                           /* bidirectional */
    c->i[2] = d[7];                                /* window (0: every key) */
    c->i[3] = d[8];                                /* query rows (0: every query) */
}
/* The buckets of attn_rel_buckets' two bucketings for relative position j - i in [-6, 6],
 * worked out by hand from transformers' relative_position_bucket (n = i - j; 8 buckets
 * bidirectional: 4 a side, 2 exact, log(n/2)/log(5/2)*2 above; 6 one-directional: 3 exact,
 * 3 + log(n/3)/log(4/3)*3 above, capped at 5). */
static const int rel_bucket_bidir[13] = { 3, 3, 3, 2, 2, 1, 0, 5, 6, 6, 7, 7, 7 };
static const int rel_bucket_onedir[13] = { 5, 5, 5, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0 };

/* Attention with a relative-position bias (d[6]) or a window (d[7]: keys within d[7] positions),
 * naively: each row's T scores in full. */
static void ref_attention_rel(double **t, const int64_t *d, const int32_t *m)
{
    const int64_t B = d[0], T = d[1], H = d[2], D = d[3], w = d[7];
    const int *bucket = d[6] == 1 ? rel_bucket_bidir : rel_bucket_onedir;
    double s[128];
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                const double *qi = t[2] + ((b * T + i) * H + h) * D;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    const double *kj = t[3] + ((b * T + j) * H + h) * D;
                    double dot = 0;
                    for (int64_t e = 0; e < D; e++) dot += qi[e] * kj[e];
                    const int seen = m[b * T + j] && (w == 0 || (j - i <= w && i - j <= w));
                    s[j] = seen ? dot / sqrt((double)D) + (t[6] ? t[6][bucket[j - i + 6] * H + h] : 0) : -INFINITY;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double *oi = t[0] + ((b * T + i) * H + h) * D;
                for (int64_t e = 0; e < D; e++) oi[e] = 0;
                for (int64_t j = 0; j < T; j++) sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
                t[1][(b * H + h) * T + i] = mx == -INFINITY ? -INFINITY : mx + log(sum);
                if (mx == -INFINITY) continue;
                for (int64_t j = 0; j < T; j++) {
                    double pj = s[j] == -INFINITY ? 0 : exp(s[j] - mx) / sum;
                    for (int64_t e = 0; e < D; e++) oi[e] += pj * t[4][((b * T + j) * H + h) * D + e];
                }
            }
}

static void ref_attention(double **t, const int64_t *d, const tr_op_call *c)
{
    int nt = tr_k_attention_threads();
    double *scr = malloc(sizeof(double) * tr_k_attention_scratch_elems(d[1], d[3], nt));
    int32_t m[1024];   /* B * T of every case, the device-only ones included */
    mask32(m, t[5], d[0] * d[1]);
    if ((t[6] && d[1] <= 7) || d[7]) {   /* the naive reference, at the T its buckets are written out for */
        ref_attention_rel(t, d, m);
    } else {
        tr_attn_relpos rel = { t[6], NULL, NULL, attn_rel_buckets(d), c->i[0], (int)c->i[1], 0, 0 };
        tr_k_attention_fwd_rel_f64(t[0], t[1], t[2], t[3], t[4], t[5] ? m : NULL, TR_I32, NULL, t[6] ? &rel : NULL,
                                   1 / sqrt((double)d[3]), d[0], d[1], d[2], d[3], scr, nt);
    }
    free(scr);
    /* query rows n (d[8]): only each sequence's first n rows are computed, the others 0 and -inf */
    const int64_t B = d[0], T = d[1], H = d[2], D = d[3], n = d[8];
    for (int64_t b = 0; n > 0 && b < B; b++)
        for (int64_t i = n; i < T; i++)
            for (int64_t h = 0; h < H; h++) {
                for (int64_t e = 0; e < D; e++) t[0][((b * T + i) * H + h) * D + e] = 0;
                t[1][(b * H + h) * T + i] = -INFINITY;
            }
}
/* d: B, T, H, D, masked, the forward's out given (else NULL: CUDA recomputes it), bias (as the
 * forward's). */
static void sh_attention_bwd(const int64_t *d, arg_spec *a)
{
    for (int i = 0; i < 8; i++) a[i] = A(4, d[0], d[1], d[2], d[3]);
    if (!d[5]) a[7] = ANULL;
    a[8] = A(3, d[0], d[2], d[1]);
    a[9] = d[4] ? (arg_spec){ 2, { d[0], d[1] }, MASK, 0, TR_I32 + 1 } : ANULL;
    a[10] = a[11] = d[6] ? A(2, attn_rel_buckets(d), d[2]) : ANULL;
}

/* attention_packed. d: variant (the lengths below), H, D. Variant 3 and up: the device-only
 * lengths, longer than the CPU's register kernel takes (its padded fallback runs there). */
static const int64_t packed_lens[][5] = {   /* B, then the lengths */
    { 3, 3, 1, 5 }, { 1, 1 }, { 3, 2, 0, 4 }, { 3, 37, 5, 30 }, { 4, 19, 32, 1, 17 },
};
static tr_attn_lengths packed_L[sizeof packed_lens / sizeof packed_lens[0]];
static int64_t packed_rows(int64_t v)
{
    int64_t n = 0;
    for (int64_t b = 0; b < packed_lens[v][0]; b++) n += packed_lens[v][1 + b];
    return n;
}
static void sh_attention_packed(const int64_t *d, arg_spec *a)
{
    int64_t N = packed_rows(d[0]);
    for (int i = 0; i < 5; i++) a[i] = A(3, N, d[1], d[2]);
    a[1] = A(1, d[1] * N);
}
static void sc_attention_packed(const int64_t *d, tr_op_call *c)
{
    packed_L[d[0]] = (tr_attn_lengths){ packed_lens[d[0]][0], &packed_lens[d[0]][1], 0 };
    c->f[0] = 0;   /* 1/sqrt(D) */
    c->p = &packed_L[d[0]];
}
static void ref_attention_packed(double **t, const int64_t *d, const tr_op_call *c)
{
    const tr_attn_lengths *L = c->p;
    const int64_t H = d[1], Dh = d[2];
    int nt = tr_k_attention_threads();
    double *scr = malloc(sizeof(double) * tr_k_attention_scratch_elems(64, Dh, nt));
    for (int64_t b = 0, off = 0; b < L->B; off += L->len[b], b++) {
        int64_t r = off * H * Dh;
        if (L->len[b] > 0)
            tr_k_attention_fwd_f64(t[0] + r, t[1] + H * off, t[2] + r, t[3] + r, t[4] + r, NULL, TR_I32, NULL,
                                   1 / sqrt((double)Dh), 1, L->len[b], H, Dh, scr, nt);
    }
    free(scr);
}

/* geglu. d: N, I, kind (0 erf, 1 tanh). */
static void sh_geglu(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], d[1]);
    a[1] = A(2, d[0], 2 * d[1]);
}
static void sh_geglu_bwd(const int64_t *d, arg_spec *a)
{
    a[0] = A(2, d[0], 2 * d[1]);
    a[1] = A(2, d[0], d[1]);
    a[2] = A(2, d[0], 2 * d[1]);
}
static void ref_geglu(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_geglu_fwd_f64(t[0], t[1], d[0], d[1], c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF);
}

/* rotary. d: B, T, H, D, theta. */
static void sh_rotary(const int64_t *d, arg_spec *a)
{
    a[0] = A(4, d[0], d[1], d[2], d[3]);
    a[1] = A(4, d[0], d[1], d[2], d[3]);
}
static void sc_rotary(const int64_t *d, tr_op_call *c) { c->f[0] = (float)d[4]; }
static void ref_rotary(double **t, const int64_t *d, const tr_op_call *c)
{
    tr_k_rotary_f64(t[0], t[1], 0, d[0] * d[1], d[1], d[2], d[3], c->f[0], 0);
}

/* ------------------------------------------------------------ list ops */

static void custom_global_norm(int dtype, int device);
static void custom_scale_check_finite(int dtype, int device);
static void custom_global_norm_into(int dtype, int device);
static void custom_clip_by_norm(int dtype, int device);
static void custom_scale_check_finite_into(int dtype, int device);
static void custom_loss_scale_update(int dtype, int device);
static void custom_scale_by_scalar(int dtype, int device);
static void custom_adamw_multi(int dtype, int device);
/* The device argument of the list ops' cases when they check the CPU slot alone. */
enum { CPU_ONLY = -100 };

/* ------------------------------------------------------------ the cases */

#define DIMS(...) { __VA_ARGS__ }

static const op_case cases[] = {
    { "matmul", sh_matmul, sc_matmul, ref_matmul, .nd = 4,
      .dims = { DIMS(0, 3, 5, 7, 0, 0), DIMS(2, 4, 3, 5, 1, 0), DIMS(3, 1, 1, 1, 0, 1), DIMS(0, 5, 9, 2, 1, 1) } },
    { "linear", sh_linear, NULL, ref_linear, .nd = 3, .dims = { DIMS(3, 5, 7, 1), DIMS(1, 1, 1, 0), DIMS(6, 4, 3, 1) } },
    { "linear_backward", sh_linear_bwd, NULL, NULL, "linear", { G(1), G(2), G(3), D(0), I(1), I(2) }, .nd = 3,
      .dims = { DIMS(3, 5, 7, 1), DIMS(1, 1, 1, 0), DIMS(6, 4, 3, 1) } },
    /* dx (+=) from a random start, as dw and dbias; a frozen weight (dx alone, as LoRA's base) */
    { "linear_backward_acc", sh_linear_bwd, NULL, NULL, "linear", { G(1), G(2), G(3), D(0), I(1), I(2) }, .nd = 4,
      .dims = { DIMS(3, 5, 7, 1, 0), DIMS(1, 1, 1, 0, 0), DIMS(6, 4, 3, 1, 0), DIMS(5, 6, 3, 0, 1) } },
    { "layernorm", sh_layernorm, sc_ln, ref_layernorm, .nd = 3, .dims = { DIMS(3, 7, 1), DIMS(1, 1, 0), DIMS(5, 13, 0) } },
    { "layernorm_backward", sh_layernorm_bwd, sc_ln, NULL, "layernorm",
      { G(3), G(4), G(5), D(0), I(3), I(4), S(1), S(2) }, .nd = 3,
      .dims = { DIMS(3, 7, 1), DIMS(1, 1, 0), DIMS(4, 5, 0) } },
    { "gelu", sh_unary, sc_gelu, ref_gelu, .nd = 4,
      .dims = { DIMS(3, 7, 0), DIMS(1, 1, 1), DIMS(5, 3, 1), DIMS(4, 6, 2) } },
    { "gelu_backward", sh_unary_bwd, sc_gelu, NULL, "gelu", { G(1), D(0), I(1) }, .nd = 3,
      .dims = { DIMS(3, 7, 0), DIMS(1, 5, 1), DIMS(3, 5, 2) } },
    { "softmax", sh_unary, NULL, ref_softmax, .nd = 3, .dims = { DIMS(3, 7), DIMS(1, 1), DIMS(4, 13) } },
    { "softmax_backward", sh_unary_bwd, NULL, NULL, "softmax", { G(1), D(0), S(0) }, .nd = 2,
      .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "tanh", sh_unary, NULL, ref_tanh, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "tanh_backward", sh_unary_bwd, NULL, NULL, "tanh", { G(1), D(0), S(0) }, .nd = 2,
      .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "attention", sh_attention, sc_attention, ref_attention, .nd = 10,
      .dims = { DIMS(2, 5, 2, 3, 1, 0, 0), DIMS(1, 1, 1, 1, 0, 0, 0), DIMS(1, 7, 3, 4, 0, 0, 0),
                DIMS(2, 7, 2, 3, 1, 0, 1), DIMS(1, 6, 3, 4, 0, 0, 2), DIMS(2, 9, 2, 3, 1, 0, 0, 2),
                DIMS(2, 70, 2, 3, 1, 0, 0, 5), DIMS(1, 75, 1, 4, 0, 0, 0, 30),
                /* the first rows only (the ninth number): plain, biased, windowed over 2 blocks */
                DIMS(2, 7, 2, 3, 1, 0, 1, 0, 2), DIMS(2, 70, 2, 3, 1, 0, 0, 5, 65) } },
    { "attention_backward", sh_attention_bwd, sc_attention, NULL, "attention",
      { G(2), G(3), G(4), D(0), I(2), I(3), I(4), S(0), S(1), I(5), G(6), I(6) }, .nd = 10,
      /* the bias table's f32 gradient sums scores' gradients whose row terms CUDA forms from the
       * forward's output rounded to the half dtype */
      .rounds_inside = 1,
      .dims = { DIMS(2, 3, 2, 3, 1, 0, 0), DIMS(1, 1, 1, 1, 0, 0, 0), DIMS(2, 3, 2, 3, 1, 1, 0),
                DIMS(2, 7, 2, 3, 1, 0, 1), DIMS(1, 6, 2, 3, 0, 1, 2), DIMS(2, 9, 2, 3, 1, 0, 0, 2),
                DIMS(1, 70, 1, 2, 1, 0, 0, 3), DIMS(2, 7, 2, 3, 1, 0, 1, 0, 1), DIMS(1, 9, 2, 3, 1, 1, 0, 2, 4),
                DIMS(1, 70, 1, 2, 1, 0, 0, 0, 65) } },
    { "attention_packed", sh_attention_packed, sc_attention_packed, ref_attention_packed, .nd = 3,
      .dims = { DIMS(0, 2, 3), DIMS(1, 1, 1), DIMS(2, 3, 32) } },
    { "add", sh_binary, NULL, ref_add, .nd = 3, .dims = { DIMS(3, 7, 0), DIMS(5, 3, 1), DIMS(1, 1, 0) } },
    { "mul", sh_binary, NULL, ref_mul, .nd = 3, .dims = { DIMS(3, 7, 0), DIMS(5, 3, 1), DIMS(1, 1, 1) } },
    { "mul_backward", sh_mul_bwd, NULL, NULL, "mul", { G(1), G(2), D(0), I(1), I(2) }, .nd = 3,
      .dims = { DIMS(3, 7, 0), DIMS(5, 3, 1), DIMS(1, 1, 1) } },
    { "scale", sh_unary, sc_alpha, ref_scale, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "axpy", sh_unary, sc_alpha, ref_axpy, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "fill", sh_fill, sc_alpha, ref_fill, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "embedding", sh_embedding, NULL, ref_embedding, .nd = 2, .dims = { DIMS(5, 3, 4), DIMS(1, 1, 1) } },
    { "embedding_backward", sh_embedding_bwd, sc_no_padding, NULL, "embedding", { G(2), D(0), I(1) }, .nd = 2,
      .dims = { DIMS(7, 3, 4), DIMS(1, 1, 1) } },
    { "dropout", sh_unary, sc_dropout, ref_dropout, .nd = 3, .dims = { DIMS(3, 7, 30), DIMS(1, 1, 0), DIMS(9, 13, 50) } },
    { "dropout_backward", sh_unary, sc_dropout, NULL, "dropout", { G(1), D(0) }, .nd = 2,
      .dims = { DIMS(3, 7, 30), DIMS(1, 1, 0) } },
    { "cross_entropy", sh_ce, sc_ce, ref_ce, .nd = 3, .dims = { DIMS(4, 5, 1), DIMS(1, 1, 0), DIMS(3, 7, 0) } },
    { "cross_entropy_backward", sh_ce_bwd, sc_ce, NULL, "cross_entropy", { G(2), I(2), S(1), I(3) },
      .scalar_dout = 1, .nd = 3, .dims = { DIMS(4, 5, 1), DIMS(1, 1, 0), DIMS(3, 7, 0) } },
    { "pool", sh_pool, sc_pool, ref_pool, .nd = 4,
      .dims = { DIMS(2, 5, 3, 0, 1), DIMS(2, 5, 3, 1, 1), DIMS(3, 4, 5, 2, 1), DIMS(1, 1, 1, 3, 0) } },
    { "pool_backward", sh_pool_bwd, sc_pool, NULL, "pool", { G(1), D(0), I(1), I(2) }, .nd = 4,
      .dims = { DIMS(2, 5, 3, 0, 1), DIMS(2, 5, 3, 1, 0), DIMS(3, 4, 5, 2, 1), DIMS(2, 3, 3, 3, 1) } },
    { "l2norm", sh_unary, sc_eps, ref_l2norm, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "l2norm_backward", sh_unary_bwd, sc_eps, NULL, "l2norm", { G(1), D(0), I(1) }, .nd = 2,
      .dims = { DIMS(3, 7), DIMS(2, 1) } },
    { "cosine_sim", sh_cos, NULL, ref_cos, .nd = 2, .dims = { DIMS(3, 4, 5), DIMS(1, 1, 1) } },
    { "cosine_sim_backward", sh_cos_bwd, NULL, NULL, "cosine_sim", { G(1), G(2), D(0), I(1), I(2) }, .nd = 2,
      .dims = { DIMS(3, 4, 5), DIMS(1, 2, 3) } },
    { "sum", sh_reduce, sc_lastdim, ref_sum, .nd = 3, .dims = { DIMS(3, 7, 0), DIMS(3, 7, 1), DIMS(1, 1, 1) } },
    { "mean", sh_reduce, sc_lastdim, ref_mean, .nd = 3, .dims = { DIMS(3, 7, 0), DIMS(5, 3, 1), DIMS(1, 1, 0) } },
    { "global_norm", .custom = custom_global_norm },
    { "scale_check_finite", .custom = custom_scale_check_finite },
    { "cast", sh_cast, NULL, ref_copy, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "adamw", sh_adamw, sc_adamw, ref_adamw, .nd = 2, .dims = { DIMS(13), DIMS(1) } },
    /* the optimizer steps without skip arguments, with a clear and a set flag (a set one
     * leaves param, state and half copy as they were), and with a skip count above the
     * known one (the step they use is the host's less the difference: SGD's first step from
     * it, Adafactor's beta2 and, with warmup_init, its relative step) */
    { "sgd", sh_sgd, sc_sgd, ref_sgd, .nd = 7,
      .dims = { DIMS(13, 0, -1, -1, 0, 2, 0), DIMS(1, 1, -1, -1, 0, 2, 0), DIMS(13, 0, 0, -1, 0, 2, 1),
                DIMS(13, 0, 1, -1, 0, 2, 1), DIMS(13, 1, 0, 3, 1, 3, 0), DIMS(7, 0, 0, 4, 1, 5, 1),
                DIMS(13, 0, 1, 3, 1, 3, 0) } },
    { "adafactor", sh_adafactor, sc_adafactor, ref_adafactor, .nd = 8,
      .dims = { DIMS(3, 5, -1, -1, 0, 4, 0, 0), DIMS(7, 0, -1, -1, 0, 4, 0, 0), DIMS(1, 1, -1, -1, 0, 4, 0, 0),
                DIMS(3, 5, 0, -1, 0, 4, 0, 1), DIMS(3, 5, 1, -1, 0, 4, 0, 1), DIMS(3, 5, 0, 5, 2, 7, 0, 1),
                DIMS(7, 0, 0, 5, 2, 7, 1, 0), DIMS(3, 5, 1, 5, 2, 7, 0, 0) } },
    { "copy_cols", sh_copy_cols, sc_copy_cols, ref_copy_cols, .nd = 2,
      .dims = { DIMS(3, 7, 4, 3, 2, 1), DIMS(2, 1, 1, 1, 0, 0) } },
    { "abs_diff", sh_abs_diff_bwd, NULL, ref_abs_diff, .nd = 2, .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "abs_diff_backward", sh_abs_diff_bwd, NULL, NULL, "abs_diff", { G(1), G(2), D(0), I(1), I(2) }, .nd = 2,
      .dims = { DIMS(3, 7), DIMS(1, 1) } },
    { "global_norm_into", .custom = custom_global_norm_into },
    { "clip_by_norm", .custom = custom_clip_by_norm },
    { "scale_check_finite_into", .custom = custom_scale_check_finite_into },
    { "adamw_multi", .custom = custom_adamw_multi },
    { "loss_scale_update", .custom = custom_loss_scale_update },
    { "scale_by_scalar", .custom = custom_scale_by_scalar },
    /* at the end, so that the random inputs of the cases above stay what they were */
    { "bias_gelu", sh_bias_gelu, sc_bias_gelu, ref_bias_gelu, .nd = 4, .rounds_inside = 1,
      .dims = { DIMS(3, 7, 1, 0), DIMS(1, 1, 1, 1), DIMS(5, 13, 0, 0), DIMS(70, 1000, 1, 0) } },
    { "bias_gelu_backward", sh_bias_gelu_bwd, sc_bias_gelu, NULL, "bias_gelu", { G(1), G(2), D(0), S(1) }, .nd = 3,
      .rounds_inside = 1, .dims = { DIMS(3, 7, 1, 0), DIMS(1, 1, 1, 1), DIMS(4, 5, 0, 1) } },
    { "dropout_add_layernorm", sh_dal, sc_dal, ref_dal, .nd = 5, .fd_ref = ref_dal_smooth, .rounds_inside = 1,
      .dims = { DIMS(3, 7, 1, 30, 0), DIMS(1, 1, 0, 0, 0), DIMS(5, 13, 0, 50, 1), DIMS(4, 9, 1, 0, 1),
                DIMS(5, 13, 1, 30, 1, 1) } },
    { "dropout_add_layernorm_backward", sh_dal_bwd, sc_dal, NULL, "dropout_add_layernorm",
      { G(4), G(5), G(6), G(7), D(0), S(1), I(6), S(2), S(3) }, .nd = 3, .rounds_inside = 1,
      .dims = { DIMS(3, 7, 1, 30, 0), DIMS(1, 1, 0, 0, 0), DIMS(4, 5, 0, 50, 1) } },
    { "cosent_loss", sh_score_loss, sc_cosent, ref_cosent, .nd = 3, .dims = { DIMS(8), DIMS(5), DIMS(1) } },
    { "cosine_mse_loss", sh_score_loss, sc_cosine_mse, ref_cosine_mse, .nd = 2, .dims = { DIMS(8), DIMS(1) } },
    /* out = gelu(h) of the h it rounded (as linear then gelu) */
    { "linear_gelu", sh_linear_gelu, sc_linear_gelu, ref_linear_gelu, .nd = 4, .rounds_inside = 1,
      .dims = { DIMS(3, 5, 7, 1, 0), DIMS(1, 1, 1, 0, 1), DIMS(6, 4, 3, 1, 1), DIMS(5, 6, 16, 0, 1) } },
    /* dh = gelu'(h) times the dh it rounded (as linear_backward then gelu_backward) */
    { "linear_backward_dgelu", sh_linear_bwd_dgelu, sc_linear_gelu, ref_linear_bwd_dgelu, .nd = 4, .rounds_inside = 1,
      .dims = { DIMS(3, 5, 7, 1, 0), DIMS(1, 1, 1, 0, 1), DIMS(6, 4, 3, 1, 1), DIMS(5, 16, 6, 0, 1) } },
    /* LoRA's down-projection over the dropped-out input: rank 20 takes two register chunks */
    { "dropout_linear", sh_dl, sc_dl, ref_dl, .nd = 4, .rounds_inside = 1,
      .dims = { DIMS(5, 37, 8, 30, 3), DIMS(1, 1, 1, 0, 3), DIMS(9, 20, 20, 50, 3), DIMS(4, 33, 3, 0, 3) } },
    { "dropout_linear_backward", sh_dl_bwd, sc_dl, ref_dl_bwd, .nd = 5, .rounds_inside = 1,
      .dims = { DIMS(5, 37, 8, 30, 3), DIMS(1, 1, 1, 0, 3), DIMS(9, 20, 20, 50, 1), DIMS(4, 33, 3, 0, 2),
                DIMS(6, 17, 4, 10, 3) } },
    /* ModernBERT's GeGLU gate: x the first half, the gate the second */
    { "geglu", sh_geglu, sc_gelu, ref_geglu, .nd = 3, .dims = { DIMS(3, 7, 0), DIMS(1, 1, 1), DIMS(70, 600, 0) } },
    { "geglu_backward", sh_geglu_bwd, sc_gelu, NULL, "geglu", { G(1), D(0), I(1) }, .nd = 2,
      .dims = { DIMS(3, 7, 0), DIMS(2, 5, 1) } },
    /* rotary position embedding: theta 10 turns the pairs fast at a few positions; 160000 is
     * ModernBERT's global theta; H*D over several staging rows */
    { "rotary", sh_rotary, sc_rotary, ref_rotary, .nd = 4,
      .dims = { DIMS(2, 5, 3, 8, 10), DIMS(1, 1, 1, 2, 10), DIMS(3, 7, 2, 16, 160000), DIMS(2, 40, 4, 64, 10000) } },
    { "rotary_backward", sh_rotary, sc_rotary, NULL, "rotary", { G(1), D(0) }, .nd = 2,
      .dims = { DIMS(2, 5, 3, 8, 10), DIMS(1, 3, 2, 4, 160000) } },
};
enum { N_CASES = (int)(sizeof cases / sizeof cases[0]) };

static const op_case *find_case(const char *op)
{
    for (int i = 0; i < N_CASES; i++)
        if (strcmp(cases[i].op, op) == 0) return &cases[i];
    return NULL;
}

/* ------------------------------------------------------------ instances */

static const int dtypes[] = { TR_F32, TR_BF16, TR_F16 };

/* Normalised error allowed for an output of dtype dt (times the case's factor). */
static double tol_of(int dt) { return dt == TR_BF16 ? 1.5e-2 : dt == TR_F16 ? 3e-3 : 2e-5; }

/* One op's arguments for one case: host values in f64 and CPU tensors over guarded data. */
typedef struct inst {
    const tr_op_desc *desc;
    arg_spec a[NT];
    tr_tensor t[NT];
    double *h[NT];       /* host values (NULL for a NULL argument) */
    unsigned char *in_bytes[NT];   /* IN arguments' bytes, to prove they are untouched */
    tr_op_call call;
} inst;

static int dtype_for(const tr_op_arg *r, const arg_spec *s, int dtype)
{
    if (s->dtype) return s->dtype - 1;
    switch (r->dtype) {
    case TR_DT_F32: return TR_F32;
    case TR_DT_INDEX: case TR_DT_MASK: return TR_I32;
    case TR_DT_HALF: return dtype == TR_F32 ? TR_BF16 : dtype;
    default: return dtype;
    }
}

/* Rounds x through dtype dt (identity for f32 and the integer dtypes' integral values). */
static void quantize(double *x, int64_t n, int dt)
{
    for (int64_t i = 0; i < n; i++) {
        float f = (float)x[i], g;
        uint16_t h;
        if (dt == TR_BF16) tr_convert(&h, TR_BF16, &f, TR_F32, 1), tr_convert(&g, TR_F32, &h, TR_BF16, 1);
        else if (dt == TR_F16) tr_convert(&h, TR_F16, &f, TR_F32, 1), tr_convert(&g, TR_F32, &h, TR_F16, 1);
        else g = f;
        x[i] = g;
    }
}

static void host_to_tensor(tr_tensor *t, const double *h)
{
    float *f = malloc(sizeof(float) * (size_t)(t->numel + 1));
    for (int64_t i = 0; i < t->numel; i++) f[i] = (float)h[i];
    tr_convert(t->data, t->dtype, f, TR_F32, (size_t)t->numel);
    free(f);
}

static void tensor_to_host(double *h, const tr_tensor *t)
{
    float *f = malloc(sizeof(float) * (size_t)(t->numel + 1));
    tr_convert(f, TR_F32, t->data, t->dtype, (size_t)t->numel);
    for (int64_t i = 0; i < t->numel; i++) h[i] = f[i];
    free(f);
}

static void draw(double *h, const arg_spec *s, int64_t n)
{
    int64_t last = s->ndim > 0 ? s->shape[s->ndim - 1] : 1;
    for (int64_t i = 0; i < n; i++) {
        double r = oc_rand();
        switch (s->fill) {
        case POS: h[i] = 0.1 + fabs(r) * 2; break;
        case IDS: h[i] = (double)((int64_t)(fabs(r) * (double)s->range) % s->range); break;
        case TGT: h[i] = i == 1 ? -100 : (double)((int64_t)(fabs(r) * (double)s->range) % s->range); break;
        case MASK: h[i] = i % last == 0 ? 1 : r > -0.3; break;
        case PADROW: h[i] = i >= n - last ? 0 : r; break;
        case VAL: h[i] = (double)s->range; break;
        default: h[i] = r;
        }
    }
}

/* Builds the arguments of `desc` from the case's shapes for dims d; OUT arguments are
 * NaN (matmul's out too when beta is 0), the rest random. */
static void inst_make(inst *k, const op_case *oc, const tr_op_desc *desc, const int64_t *d, int dtype)
{
    memset(k, 0, sizeof *k);
    k->desc = desc;
    for (int i = 0; i < NT; i++) k->a[i] = ANULL;
    oc->shapes(d, k->a);
    if (oc->scalars) oc->scalars(d, &k->call);
    for (int i = 0; i < desc->nargs; i++) {
        const arg_spec *s = &k->a[i];
        if (s->ndim < 0) continue;
        tr_tensor *t = &k->t[i];
        t->ndim = s->ndim;
        for (int j = 0; j < s->ndim; j++) t->shape[j] = s->shape[j];
        t->numel = numel_of(s);
        t->dtype = dtype_for(&desc->args[i], s, dtype);
        t->device = TR_CPU;
        t->tag = TR_TAG_ACTIVATIONS;
        t->data = oc_guarded((size_t)t->numel * tr_dtype_size(t->dtype) + 1);
        k->h[i] = calloc((size_t)t->numel + 1, sizeof(double));
        int poison = desc->args[i].role == TR_ARG_OUT ||
                     (strcmp(desc->name, "matmul") == 0 && i == 0 && k->call.f[1] == 0);
        if (poison) {
            for (int64_t e = 0; e < t->numel; e++) k->h[i][e] = NAN;
        } else {
            draw(k->h[i], s, t->numel);
            quantize(k->h[i], t->numel, t->dtype);
        }
        host_to_tensor(t, k->h[i]);
        k->call.t[i] = t;
    }
}

static void inst_snapshot_inputs(inst *k)
{
    for (int i = 0; i < k->desc->nargs; i++)
        if (k->h[i] && k->desc->args[i].role == TR_ARG_IN) {
            size_t nb = (size_t)k->t[i].numel * tr_dtype_size(k->t[i].dtype);
            k->in_bytes[i] = malloc(nb + 1);
            memcpy(k->in_bytes[i], k->t[i].data, nb);
        }
}

/* Guards intact everywhere, inputs unchanged. */
static void inst_check_memory(const inst *k, const char *what)
{
    for (int i = 0; i < k->desc->nargs; i++) {
        if (!k->h[i]) continue;
        CHECK(oc_guard_ok(k->t[i].data), "%s: a write outside %s", what, k->desc->args[i].name);
        if (k->in_bytes[i])
            CHECK(memcmp(k->in_bytes[i], k->t[i].data, (size_t)k->t[i].numel * tr_dtype_size(k->t[i].dtype)) == 0,
                  "%s: input %s was changed", what, k->desc->args[i].name);
    }
}

static void inst_free(inst *k)
{
    for (int i = 0; i < NT; i++) {
        if (k->h[i]) oc_guarded_free(k->t[i].data);
        free(k->h[i]);
        free(k->in_bytes[i]);
    }
}

static double *dup(const double *x, int64_t n)
{
    double *y = malloc(sizeof(double) * (size_t)(n + 1));
    if (x) memcpy(y, x, sizeof(double) * (size_t)n);
    return y;
}

/* Compares every OUT and ACC argument of k (its tensors) with want[i]. */
static void compare_outputs(const inst *k, double **want, const char *what, double factor, int half_dt)
{
    for (int i = 0; i < k->desc->nargs; i++) {
        if (!k->h[i] || k->desc->args[i].role == TR_ARG_IN) continue;
        int64_t n = k->t[i].numel;
        double *got = dup(NULL, n);
        tensor_to_host(got, &k->t[i]);
        double err = oc_norm_err(got, want[i], n, k->t[i].dtype == TR_F32 ? 1e-3 : 1e-2);
        double tol = tol_of(k->t[i].dtype == TR_F32 && half_dt ? half_dt : k->t[i].dtype) * factor;
        CHECK(err <= tol, "%s: %s (%s, %lld elements) has normalised error %.3g > %.3g (first: %.9g vs %.9g)", what,
              k->desc->args[i].name, tr_dtype_name(k->t[i].dtype), (long long)n, err, tol, got[0], want[i][0]);
        free(got);
    }
}

/* ------------------------------------------------------------ forward cases */

static void run_forward(const op_case *oc, const tr_op_desc *desc, const int64_t *d, int dtype, const char *what)
{
    inst k;
    inst_make(&k, oc, desc, d, dtype);
    double *want[NT] = { 0 };
    for (int i = 0; i < desc->nargs; i++) want[i] = k.h[i] ? dup(k.h[i], k.t[i].numel) : NULL;
    oc->ref(want, d, &k.call);
    inst_snapshot_inputs(&k);
    int rc = tr_op_run(ctx, desc, &k.call);
    CHECK(rc == TR_OK, "%s: rc %d: %s", what, rc, tr_ctx_errmsg(ctx));
    if (rc == TR_OK) compare_outputs(&k, want, what, oc->tol ? oc->tol : 1, oc->rounds_inside && dtype != TR_F32 ? dtype : 0);
    inst_check_memory(&k, what);
    for (int i = 0; i < NT; i++) free(want[i]);
    inst_free(&k);
}

/* ------------------------------------------------------------ backward cases */

/* L(x) = sum over the forward's outputs o of dout_o . o(x), for finite differences. */
typedef struct fd_ctx {
    const op_case *fc;
    const tr_op_desc *fdesc;
    const int64_t *d;
    tr_op_call call;
    double *x[NT];         /* the forward's inputs (perturbed) */
    double *dout[NT];      /* per forward output: its incoming gradient, or NULL */
    int64_t n[NT];
    double scalar_dout;    /* cross-entropy: dloss on output 0 */
} fd_ctx;

static double fd_loss(void *user)
{
    fd_ctx *f = user;
    double *t[NT] = { 0 };
    for (int i = 0; i < f->fdesc->nargs; i++)
        if (f->x[i]) t[i] = dup(f->x[i], f->n[i]);
    (f->fc->fd_ref ? f->fc->fd_ref : f->fc->ref)(t, f->d, &f->call);
    double L = f->scalar_dout != 0 ? f->scalar_dout * t[0][0] : 0;
    for (int i = 0; i < f->fdesc->nargs; i++) {
        if (f->dout[i]) L += oc_dot(f->dout[i], t[i], f->n[i]);
        free(t[i]);
    }
    return L;
}

/* The forward of backward case oc on d in dtype: its instance *f (inputs rounded to dtype)
 * and, in saved, its outputs from the f64 reference (the caller frees both). Returns the
 * forward's case, or NULL (a failed CHECK naming what) when it has none. */
static const op_case *forward_saved(const op_case *oc, const int64_t *d, int dtype, const char *what, inst *f,
                                    double **saved)
{
    const op_case *fc = find_case(oc->fwd);
    const tr_op_desc *fdesc = tr_op_find(oc->fwd);
    CHECK(fc && fdesc, "%s: forward %s has no case", what, oc->fwd);
    if (!fc || !fdesc) return NULL;
    inst_make(f, fc, fdesc, d, dtype);
    for (int i = 0; i < fdesc->nargs; i++) saved[i] = f->h[i] ? dup(f->h[i], f->t[i].numel) : NULL;
    fc->ref(saved, d, &f->call);
    return fc;
}

static void run_backward(const op_case *oc, const tr_op_desc *desc, const int64_t *d, int dtype, const char *what)
{
    /* the forward's inputs (rounded to the dtype under test) and its saved outputs */
    inst f;
    double *saved[NT] = { 0 };
    const op_case *fc = forward_saved(oc, d, dtype, what, &f, saved);
    if (!fc) return;
    const tr_op_desc *fdesc = f.desc;

    inst k;
    inst_make(&k, oc, desc, d, dtype);
    fd_ctx fd = { fc, fdesc, d, f.call, { 0 }, { 0 }, { 0 }, oc->scalar_dout ? k.call.f[1] : 0 };
    for (int i = 0; i < fdesc->nargs; i++) {
        fd.n[i] = f.h[i] ? f.t[i].numel : 0;
        if (f.h[i]) fd.x[i] = dup(f.h[i], fd.n[i]);   /* outputs: overwritten by the reference */
    }
    for (int i = 0; i < desc->nargs; i++) {
        if (!k.h[i]) continue;
        int m = oc->map[i], j = m % 100;
        if (m >= 400) memcpy(k.h[i], saved[j], sizeof(double) * (size_t)k.t[i].numel);
        else if (m >= 300) memcpy(k.h[i], f.h[j], sizeof(double) * (size_t)k.t[i].numel);
        else if (m >= 200) fd.dout[j] = k.h[i];   /* drawn at random by inst_make */
        else continue;
        quantize(k.h[i], k.t[i].numel, k.t[i].dtype);
        host_to_tensor(&k.t[i], k.h[i]);
    }
    double *want[NT] = { 0 };
    for (int i = 0; i < desc->nargs; i++) {
        int m = oc->map[i];
        if (!k.h[i] || m < 100 || m >= 200) continue;
        int j = m % 100;
        want[i] = dup(NULL, k.t[i].numel);
        oc_fd_grad(want[i], fd.x[j], k.t[i].numel, fd_loss, &fd);
        if (desc->args[i].role == TR_ARG_ACC)
            for (int64_t e = 0; e < k.t[i].numel; e++) want[i][e] += k.h[i][e];
    }
    inst_snapshot_inputs(&k);
    int rc = tr_op_run(ctx, desc, &k.call);
    CHECK(rc == TR_OK, "%s: rc %d: %s", what, rc, tr_ctx_errmsg(ctx));
    /* a backward's tolerance is looser in half: its saved inputs were rounded */
    if (rc == TR_OK)
        compare_outputs(&k, want, what, (oc->tol ? oc->tol : 1) * (dtype == TR_F32 ? 10 : 2),
                        oc->rounds_inside && dtype != TR_F32 ? dtype : 0);
    inst_check_memory(&k, what);
    for (int i = 0; i < NT; i++) free(want[i]), free(saved[i]), free(fd.x[i]);
    inst_free(&k);
    inst_free(&f);
}

/* ------------------------------------------------------------ other backends */

static int skipped;

/* --cuda (tests/gpu/run.sh): only the CUDA slots against the CPU's, one PASS/FAIL line per
 * op, dtype and shape with its error figures; SKIP lines when no GPU is present. */
static int device_only;
static int only_dtype = -1;   /* --cuda f32: that dtype only (the smaller pass under compute-sanitizer) */
static int device_cases_passed, device_cases_failed;

/* The dropout ops' masks must be the CPU's bit for bit: their outputs compare exactly
 * (dropout_add_layernorm's masks too, but its layernorm reduces in another order). */
static int exact_op(const char *op) { return strcmp(op, "dropout") == 0 || strcmp(op, "dropout_backward") == 0; }

/* max |a - b| / max(floor, max |b|), equal values (infinities too) counting 0. */
static double max_err(const double *a, const double *b, int64_t n, double floor)
{
    double num = 0, den = floor;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] == b[i] ? 0 : fabs(a[i] - b[i]);
        if (d != d) return INFINITY;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / den;
}

/* Below this root-mean-square (a tenth of the cases' unit-scale inputs) the reference is
 * judged against it instead of itself: an output that is zero in exact arithmetic
 * (layernorm's dx over one column) is rounding noise of terms near 1 on both sides, and
 * normalising by its own size would make any noise an error of 1. */
#define NMSE_RMS_FLOOR 1e-1

/* nmse with equal values (infinities too) counting 0, normalised by at least the floor. */
static double nmse_of(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] == b[i] ? 0 : a[i] - b[i];
        num += d * d;
        if (isfinite(b[i])) den += b[i] * b[i];
    }
    const double floor = (double)n * NMSE_RMS_FLOOR * NMSE_RMS_FLOOR;
    return n > 0 ? num / (den > floor ? den : floor) : 0;
}

/* Opens one device case: its own line ("ops_table.<op>.cuda:<d> <dtype> shape <s>"). */
static char device_case[160];
static void device_case_begin(const char *op, int device, int dtype, int shape)
{
    char dev[32];
    tr_op_device_name(dev, sizeof dev, device);
    snprintf(device_case, sizeof device_case, "ops_table.%s.%s %s shape %d", op, dev, tr_dtype_name(dtype), shape);
    check_case_name = device_case;
    check_case_failed = 0;
}

/* The harness's own check (the normal run): the device cases with the CPU standing in for
 * the device, quietly; only a FAIL prints. */
static int harness_quiet;

static void device_case_end(const char *figures)
{
    if (check_case_failed) {
        device_cases_failed++;
    } else {
        if (!harness_quiet) printf("PASS %s: %s\n", device_case, figures);
        device_cases_passed++;
    }
    fflush(stdout);
}

/* A backward's inputs as its forward makes them: the forward's inputs, and its saved
 * outputs from the f64 reference (attention's lse must belong to its q and k), rounded to
 * each tensor's dtype. */
static void backward_inputs(const op_case *oc, const int64_t *d, int dtype, inst *k)
{
    inst f;
    double *saved[NT] = { 0 };
    if (!forward_saved(oc, d, dtype, device_case, &f, saved)) return;
    for (int i = 0; i < k->desc->nargs; i++) {
        int m = oc->map[i], j = m % 100;
        if (!k->h[i] || m < 300) continue;
        memcpy(k->h[i], m >= 400 ? saved[j] : f.h[j], sizeof(double) * (size_t)k->t[i].numel);
        quantize(k->h[i], k->t[i].numel, k->t[i].dtype);
        host_to_tensor(&k->t[i], k->h[i]);
    }
    for (int i = 0; i < NT; i++) free(saved[i]);
    inst_free(&f);
}

/* The key of the device-only attention cases with dropout. */
static const tr_rng_key attn_key = { 1234, 7, 3, 2 };

#define AB(name) TR_ARGI(attention_backward, name)

/* attention_backward with the forward's out given (device tensors dev of call c, their
 * second copies dev2 of c2): out and lse of both become that device's own forward's (the
 * f64 reference's out has no dropout), and c2 runs with out NULL, so the harness's rerun
 * check holds the two paths to the same bits (the recompute runs the forward's kernel). The
 * CPU reads no out. */
static int attention_out_of_device_forward(tr_tensor *const *dev, tr_tensor *const *dev2, const tr_op_call *c,
                                           tr_op_call *c2)
{
    int rc = tr_op_attention(ctx, dev[AB(out)], dev[AB(lse)], dev[AB(q)], dev[AB(k)], dev[AB(v)], dev[AB(mask)],
                             c->f[0], c->f[1], c->p, dev[AB(rel_bias)], (int)c->i[0], (int)c->i[1],
                             (int)c->i[2], (int)c->i[3]);
    if (rc == TR_OK) rc = tr_tensor_copy(ctx, dev2[AB(lse)], dev[AB(lse)]);
    c2->t[AB(out)] = NULL;
    CHECK(rc == TR_OK, "the device's forward for out: %s", tr_ctx_errmsg(ctx));
    return rc == TR_OK;
}

/* The same case on `device` against the CPU: the inputs (and the starting values of
 * every accumulated output, and the NaN of every overwritten one) are copied to the
 * device with tr_tensor_copy, both slots run, the device's outputs come back and are
 * compared by normalised mean-square error (dropout: bit for bit); a second run on a
 * second copy must give the same bits (attention_backward with out given: the second runs
 * without it). attn_dropout > 0 turns on attention's dropout with attn_key. */
/* 1 when `device` is a CUDA card without bf16 (compute capability below 8.0) and the call
 * has a bf16 tensor: the CUDA backend declines such calls (core/cuda_ops/cuda_backend.c). */
static int card_lacks_bf16(int device)
{
    tr_cuda_card card;
    return device != TR_CPU && tr_cuda_device_card(device, &card) == TR_OK && card.major < 8;
}

static int declined_on_card(const tr_op_call *call, int device)
{
    if (!card_lacks_bf16(device)) return 0;
    for (int i = 0; i < TR_OP_MAX_TENSORS; i++)
        if (call->t[i] && call->t[i]->dtype == TR_BF16) return 1;
    for (int i = 0; call->list && i < call->nlist; i++)
        if (call->list[i] && call->list[i]->dtype == TR_BF16) return 1;
    return 0;
}

static void run_on_device(const op_case *oc, const tr_op_desc *desc, const int64_t *d, int dtype, int device,
                          int shape, float attn_dropout)
{
    device_case_begin(desc->name, device, dtype, shape);
    if (attn_dropout > 0) {
        size_t len = strlen(device_case);
        snprintf(device_case + len, sizeof device_case - len, " dropout %g", (double)attn_dropout);
    }
    inst k;
    inst_make(&k, oc, desc, d, dtype);
    if (oc->fwd) backward_inputs(oc, d, dtype, &k);
    if (attn_dropout > 0) {
        k.call.f[1] = attn_dropout;
        k.call.p = &attn_key;
    }
    /* two device copies of every argument: the second run must repeat the first bit for
     * bit (no float atomics, fixed reduction trees) */
    tr_tensor *dev[NT] = { 0 }, *dev2[NT] = { 0 };
    tr_op_call dc = k.call, dc2 = k.call;
    int ok = 1;
    for (int i = 0; i < desc->nargs && ok; i++) {
        if (!k.h[i]) continue;
        dev[i] = tr_tensor_new(ctx, k.t[i].ndim, k.t[i].shape, k.t[i].dtype, device, TR_TAG_ACTIVATIONS);
        dev2[i] = tr_tensor_new(ctx, k.t[i].ndim, k.t[i].shape, k.t[i].dtype, device, TR_TAG_ACTIVATIONS);
        ok = dev[i] && dev2[i] && tr_tensor_copy(ctx, dev[i], &k.t[i]) == TR_OK &&
             tr_tensor_copy(ctx, dev2[i], &k.t[i]) == TR_OK;
        dc.t[i] = dev[i];
        dc2.t[i] = dev2[i];
    }
    CHECK(ok, "device tensors: %s", tr_ctx_errmsg(ctx));
    if (ok && declined_on_card(&dc, device)) {
        /* a card without bf16 (before sm_80): the CUDA slot must decline the call, with the
         * dispatcher's message, and run nothing */
        int rd = tr_op_run(ctx, desc, &dc);
        CHECK(rd == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "cannot run these arguments"),
              "a bf16 call on a card without bf16: rc %d (%s), not the dispatcher's decline", rd, tr_ctx_errmsg(ctx));
        for (int i = 0; i < NT; i++) tr_tensor_free(dev[i]), tr_tensor_free(dev2[i]);
        inst_free(&k);
        device_case_end("declined: the card has no bf16 (compute capability below 8.0)");
        return;
    }
    const int attn_out = desc->id == TR_OPID_attention_backward && k.h[AB(out)];
    if (ok && attn_out) ok = attention_out_of_device_forward(dev, dev2, &dc, &dc2);
    int rc = ok ? tr_op_run(ctx, desc, &k.call) : TR_EINTERNAL;
    CHECK(rc == TR_OK, "cpu rc %d: %s", rc, tr_ctx_errmsg(ctx));
    int rd = ok ? tr_op_run(ctx, desc, &dc) : TR_EINTERNAL;
    CHECK(rd == TR_OK, "cuda rc %d: %s", rd, tr_ctx_errmsg(ctx));
    int rd2 = ok && rd == TR_OK ? tr_op_run(ctx, desc, &dc2) : TR_EINTERNAL;
    CHECK(rd2 == TR_OK, "cuda rerun rc %d: %s", rd2, tr_ctx_errmsg(ctx));
    double worst_max = 0, worst_nmse = 0;
    const char *worst = "-";
    for (int i = 0; ok && rc == TR_OK && rd == TR_OK && i < desc->nargs; i++) {
        if (!k.h[i] || desc->args[i].role == TR_ARG_IN) continue;
        int64_t n = k.t[i].numel;
        tr_tensor host = k.t[i];
        host.data = malloc(tr_tensor_nbytes(&k.t[i]) + 1);
        CHECK(tr_tensor_copy(ctx, &host, dev[i]) == TR_OK, "copy back %s: %s", desc->args[i].name, tr_ctx_errmsg(ctx));
        if (rd2 == TR_OK) {
            tr_tensor again = k.t[i];
            again.data = malloc(tr_tensor_nbytes(&k.t[i]) + 1);
            CHECK(tr_tensor_copy(ctx, &again, dev2[i]) == TR_OK, "copy back: %s", tr_ctx_errmsg(ctx));
            CHECK(memcmp(again.data, host.data, tr_tensor_nbytes(&host)) == 0, "%s: %s", desc->args[i].name,
                  attn_out ? "the run with out given and the one recomputing it gave other bits"
                           : "a second run on the same inputs gave other bits (not deterministic)");
            free(again.data);
        }
        double *a = dup(NULL, n), *b = dup(NULL, n);
        tensor_to_host(a, &host);
        tensor_to_host(b, &k.t[i]);
        /* an f32 output of an op that rounds intermediates to the half dtype under test is
         * held to that dtype's bound */
        int half = k.t[i].dtype == TR_BF16 || k.t[i].dtype == TR_F16 || (oc->rounds_inside && dtype != TR_F32);
        double e = nmse_of(a, b, n), m = max_err(a, b, n, half ? 1e-2 : 1e-3);
        double tol = exact_op(desc->name) ? 0 : half ? 1e-4 : 1e-7;
        if (exact_op(desc->name))
            CHECK(memcmp(host.data, k.t[i].data, tr_tensor_nbytes(&host)) == 0,
                  "%s differs from the CPU's bits (max error %.3g): the dropout masks must be identical",
                  desc->args[i].name, m);
        CHECK(e <= tol, "%s (%s, %lld elements): NMSE %.3g > %.3g against the CPU, max error %.3g (first %.9g vs %.9g)",
              desc->args[i].name, tr_dtype_name(k.t[i].dtype), (long long)n, e, tol, m, a[0], b[0]);
        if (m >= worst_max) worst_max = m, worst_nmse = e, worst = desc->args[i].name;
        free(a), free(b), free(host.data);
    }
    for (int i = 0; i < NT; i++) tr_tensor_free(dev[i]), tr_tensor_free(dev2[i]);
    inst_free(&k);
    char fig[200];
    snprintf(fig, sizeof fig, "max error %.3g (%s), nmse %.3g%s, rerun bitwise equal", worst_max, worst, worst_nmse,
             exact_op(desc->name) ? ", bitwise equal to the CPU" : "");
    device_case_end(fig);
}

/* ------------------------------------------------------------ list ops */

/* Three tensors of dtype on the CPU with values of the given scale (their f64 values in h). */
static void list_make(tr_tensor **ts, double **h, int n, const int64_t (*shapes)[2], const int *ndims, int dtype,
                      double scale)
{
    for (int i = 0; i < n; i++) {
        ts[i] = tr_tensor_new(ctx, ndims[i], shapes[i], dtype, TR_CPU, TR_TAG_GRADS);
        h[i] = dup(NULL, ts[i]->numel);
        oc_fill(h[i], ts[i]->numel, scale);
        quantize(h[i], ts[i]->numel, dtype);
        host_to_tensor(ts[i], h[i]);
    }
}

/* Copies of the CPU tensors on device. */
static int list_to_device(tr_tensor **dev, tr_tensor **ts, int n, int device)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        dev[i] = tr_tensor_new(ctx, ts[i]->ndim, ts[i]->shape, ts[i]->dtype, device, TR_TAG_GRADS);
        ok = ok && dev[i] && tr_tensor_copy(ctx, dev[i], ts[i]) == TR_OK;
    }
    return ok;
}

/* device CPU_ONLY: the CPU slot against the f64 sum; otherwise the slot of `device` against
 * the CPU slot as well, one case line. */
static void custom_global_norm(int dtype, int device)
{
    static const int64_t shapes[3][2] = { { 3, 7 }, { 1, 0 }, { 13, 0 } };
    static const int ndims[3] = { 2, 1, 1 };
    tr_tensor *ts[3], *dev[3] = { 0 };
    double *h[3], ss = 0;
    list_make(ts, h, 3, shapes, ndims, dtype, 2);
    for (int i = 0; i < 3; i++) ss += oc_dot(h[i], h[i], ts[i]->numel);
    float got = -1, on_dev = -1;
    if (device != CPU_ONLY) device_case_begin("global_norm", device, dtype, 0);
    CHECK(tr_op_global_norm(ctx, &got, ts, 3) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(fabs(got - sqrt(ss)) <= 1e-5 * sqrt(ss), "global_norm %s: %.9g vs %.12g", tr_dtype_name(dtype), got,
          sqrt(ss));
    if (device != CPU_ONLY) {
        CHECK(list_to_device(dev, ts, 3, device), "device tensors: %s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_global_norm(ctx, &on_dev, dev, 3) == TR_OK, "cuda: %s", tr_ctx_errmsg(ctx));
        double e = fabs((double)on_dev - got) / (got > 0 ? got : 1);
        CHECK(e <= 1e-6, "global_norm on cuda:%d %.9g vs the CPU's %.9g (relative error %.3g)", device, on_dev, got, e);
        char fig[120];
        snprintf(fig, sizeof fig, "max error %.3g (norm %.9g vs %.9g)", e, on_dev, got);
        device_case_end(fig);
    }
    for (int i = 0; i < 3; i++) tr_tensor_free(ts[i]), tr_tensor_free(dev[i]), free(h[i]);
}

/* The CPU slot against the formula; on a device, the same calls against the CPU: the
 * scaled values, found_inf for a finite list, an inf, and (f16) a finite f32 product that
 * overflows the stored half. */
static void custom_scale_check_finite(int dtype, int device)
{
    static const int64_t shapes[2][2] = { { 5, 3 }, { 1, 0 } };
    static const int ndims[2] = { 2, 1 };
    tr_tensor *ts[2], *dev[2] = { 0 };
    double *h[2];
    list_make(ts, h, 2, shapes, ndims, dtype, 1);
    if (device != CPU_ONLY) {
        device_case_begin("scale_check_finite", device, dtype, 0);
        CHECK(list_to_device(dev, ts, 2, device), "device tensors: %s", tr_ctx_errmsg(ctx));
    }
    int found = -1, found_dev = -1;
    double worst = 0;
    CHECK(tr_op_scale_check_finite(ctx, &found, ts, 2, 0.5f) == TR_OK && found == 0, "found_inf %d: %s", found,
          tr_ctx_errmsg(ctx));
    if (device != CPU_ONLY)
        CHECK(tr_op_scale_check_finite(ctx, &found_dev, dev, 2, 0.5f) == TR_OK && found_dev == 0,
              "cuda found_inf %d: %s", found_dev, tr_ctx_errmsg(ctx));
    for (int i = 0; i < 2; i++) {
        double *got = dup(NULL, ts[i]->numel);
        tensor_to_host(got, ts[i]);
        for (int64_t e = 0; e < ts[i]->numel; e++) h[i][e] *= 0.5;
        CHECK(oc_norm_err(got, h[i], ts[i]->numel, 1e-3) <= tol_of(dtype), "scale_check_finite %s: scaled values",
              tr_dtype_name(dtype));
        if (device != CPU_ONLY) {
            tr_tensor back = *ts[i];
            back.data = malloc(tr_tensor_nbytes(ts[i]) + 1);
            double *b = dup(NULL, ts[i]->numel);
            CHECK(tr_tensor_copy(ctx, &back, dev[i]) == TR_OK, "copy back: %s", tr_ctx_errmsg(ctx));
            tensor_to_host(b, &back);
            double e = max_err(b, got, ts[i]->numel, 1e-3);
            CHECK(e == 0, "tensor %d on cuda:%d differs from the CPU's by %.3g (a scale is one rounding)", i, device,
                  e);
            if (e > worst) worst = e;
            free(b), free(back.data);
        }
        free(got);
    }
    h[1][0] = INFINITY;
    host_to_tensor(ts[1], h[1]);
    CHECK(tr_op_scale_check_finite(ctx, &found, ts, 2, 1.0f) == TR_OK && found == 1, "an inf must be found (%d)",
          found);
    if (device != CPU_ONLY) {
        CHECK(tr_tensor_copy(ctx, dev[1], ts[1]) == TR_OK, "copy: %s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_scale_check_finite(ctx, &found_dev, dev, 2, 1.0f) == TR_OK && found_dev == 1,
              "an inf must be found on cuda:%d (%d)", device, found_dev);
        if (dtype == TR_F16) {
            /* 40000 * 2 is finite in f32 but beyond f16's 65504 */
            h[1][0] = 40000;
            host_to_tensor(ts[1], h[1]);
            CHECK(tr_tensor_copy(ctx, dev[1], ts[1]) == TR_OK, "copy: %s", tr_ctx_errmsg(ctx));
            CHECK(tr_op_scale_check_finite(ctx, &found_dev, dev, 2, 2.0f) == TR_OK && found_dev == 1,
                  "a half overflow must be found on cuda:%d (%d)", device, found_dev);
        }
        char fig[120];
        snprintf(fig, sizeof fig, "max error %.3g, found_inf agrees", worst);
        device_case_end(fig);
    }
    for (int i = 0; i < 2; i++) tr_tensor_free(ts[i]), tr_tensor_free(dev[i]), free(h[i]);
}

/* ------------------------------------------------------------ device-resident list ops */

/* A 1-D tensor of n elements of dtype on device (tag grads). */
static tr_tensor *vec(int64_t n, int dtype, int device)
{
    return tr_tensor_new(ctx, 1, &n, dtype, device, TR_TAG_GRADS);
}

/* A copy of t on device. */
static tr_tensor *clone_on(const tr_tensor *t, int device)
{
    tr_tensor *c = tr_tensor_new(ctx, t->ndim, t->shape, t->dtype, device, TR_TAG_GRADS);
    if (c && tr_tensor_copy(ctx, c, t) != TR_OK) {
        tr_tensor_free(c);
        return NULL;
    }
    return c;
}

/* Whether a (any device) holds b's (CPU) bytes exactly. */
static int same_bits(const tr_tensor *a, const tr_tensor *b)
{
    tr_tensor *h = clone_on(a, TR_CPU);
    int same = h && memcmp(h->data, b->data, tr_tensor_nbytes(b)) == 0;
    tr_tensor_free(h);
    return same;
}

/* The largest relative error of a (any device) against b (CPU), both floating. */
static double rel_err(const tr_tensor *a, const tr_tensor *b)
{
    tr_tensor *h = clone_on(a, TR_CPU);
    double *x = dup(NULL, b->numel), *y = dup(NULL, b->numel);
    tensor_to_host(x, h);
    tensor_to_host(y, b);
    double e = max_err(x, y, b->numel, 1e-3);
    free(x), free(y);
    tr_tensor_free(h);
    return e;
}

static float f32_of(const tr_tensor *t)
{
    float v = NAN;
    tr_tensor *h = clone_on(t, TR_CPU);
    if (h) v = ((float *)h->data)[0];
    tr_tensor_free(h);
    return v;
}

static int32_t i32_of(const tr_tensor *t)
{
    int32_t v = -1;
    tr_tensor *h = clone_on(t, TR_CPU);
    if (h) v = ((int32_t *)h->data)[0];
    tr_tensor_free(h);
    return v;
}

static tr_tensor *flag_on(int32_t value, int device)
{
    tr_tensor *f = vec(1, TR_I32, TR_CPU), *d;
    ((int32_t *)f->data)[0] = value;
    d = clone_on(f, device);
    tr_tensor_free(f);
    return d;
}

/* The norm in a tensor is global_norm's host float, bit for bit (CPU); on a device, the
 * same norm within f32 summation order. */
static void custom_global_norm_into(int dtype, int device)
{
    static const int64_t shapes[3][2] = { { 3, 7 }, { 1, 0 }, { 13, 0 } };
    static const int ndims[3] = { 2, 1, 1 };
    tr_tensor *ts[3], *dev[3] = { 0 }, *norm = vec(1, TR_F32, TR_CPU);
    double *h[3];
    list_make(ts, h, 3, shapes, ndims, dtype, 2);
    float host = -1;
    CHECK(tr_op_global_norm(ctx, &host, ts, 3) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_global_norm_into(ctx, norm, ts, 3) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(memcmp(norm->data, &host, sizeof host) == 0, "global_norm_into %.9g vs global_norm %.9g",
          (double)((float *)norm->data)[0], (double)host);
    if (device != CPU_ONLY) {
        device_case_begin("global_norm_into", device, dtype, 0);
        tr_tensor *dn = vec(1, TR_F32, device);
        CHECK(list_to_device(dev, ts, 3, device), "device tensors: %s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_global_norm_into(ctx, dn, dev, 3) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        double e = fabs((double)f32_of(dn) - host) / (host > 0 ? host : 1);
        CHECK(e <= 1e-6, "global_norm_into on %d: %.9g vs the CPU's %.9g", device, (double)f32_of(dn), (double)host);
        char fig[120];
        snprintf(fig, sizeof fig, "relative error %.3g, no host result", e);
        device_case_end(fig);
        tr_tensor_free(dn);
    }
    for (int i = 0; i < 3; i++) tr_tensor_free(ts[i]), tr_tensor_free(dev[i]), free(h[i]);
    tr_tensor_free(norm);
}

/* clip_by_norm against the eager clip (coef in f32, scale when below 1): the same bits;
 * a max_norm above the norm changes nothing; a NaN norm changes nothing and sets the
 * flag. On a device: the same bits as the CPU (the same two f32 roundings, one scale). */
static void custom_clip_by_norm(int dtype, int device)
{
    static const int64_t shapes[2][2] = { { 5, 3 }, { 4, 0 } };
    static const int ndims[2] = { 2, 1 };
    tr_tensor *a[2], *b[2], *dev[2] = { 0 }, *norm = vec(1, TR_F32, TR_CPU), *flag = flag_on(0, TR_CPU);
    double *h[2], *h2[2];
    list_make(a, h, 2, shapes, ndims, dtype, 3);
    for (int i = 0; i < 2; i++) {
        b[i] = clone_on(a[i], TR_CPU);
        h2[i] = NULL;
    }
    if (device != CPU_ONLY) {
        device_case_begin("clip_by_norm", device, dtype, 0);
        CHECK(list_to_device(dev, a, 2, device), "device tensors: %s", tr_ctx_errmsg(ctx));
    }
    float n = 0;
    CHECK(tr_op_global_norm(ctx, &n, a, 2) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    ((float *)norm->data)[0] = n;
    const float max_norm = n / 3;
    const float coef = max_norm / (n + 1e-6f);
    for (int i = 0; i < 2; i++) CHECK(tr_op_scale(ctx, b[i], b[i], coef) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_clip_by_norm(ctx, a, 2, norm, flag, max_norm, 1e-6f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 2; i++) CHECK(same_bits(a[i], b[i]), "clip_by_norm: tensor %d differs from the eager clip", i);
    CHECK(i32_of(flag) == 0, "a finite norm must leave the flag alone");
    /* above the norm: nothing changes */
    CHECK(tr_op_clip_by_norm(ctx, a, 2, norm, NULL, n * 4, 1e-6f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 2; i++) CHECK(same_bits(a[i], b[i]), "max_norm above the norm changed tensor %d", i);
    ((float *)norm->data)[0] = NAN;
    CHECK(tr_op_clip_by_norm(ctx, a, 2, norm, flag, max_norm, 1e-6f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 2; i++) CHECK(same_bits(a[i], b[i]), "a NaN norm changed tensor %d", i);
    CHECK(i32_of(flag) == 1, "a NaN norm must set the flag");
    if (device != CPU_ONLY) {
        tr_tensor *dn = vec(1, TR_F32, device), *df = flag_on(0, device);
        ((float *)norm->data)[0] = n;
        CHECK(dn && tr_tensor_copy(ctx, dn, norm) == TR_OK, "copy: %s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_clip_by_norm(ctx, dev, 2, dn, df, max_norm, 1e-6f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        for (int i = 0; i < 2; i++)
            CHECK(same_bits(dev[i], b[i]), "clip_by_norm on %d: tensor %d differs from the CPU's (error %.3g)", device,
                  i, rel_err(dev[i], b[i]));
        ((float *)norm->data)[0] = INFINITY;
        CHECK(tr_tensor_copy(ctx, dn, norm) == TR_OK, "copy: %s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_clip_by_norm(ctx, dev, 2, dn, df, max_norm, 1e-6f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(i32_of(df) == 1, "an infinite norm must set the flag on %d", device);
        for (int i = 0; i < 2; i++) CHECK(same_bits(dev[i], b[i]), "an infinite norm changed tensor %d", i);
        device_case_end("bitwise equal to the CPU, flag set on a non-finite norm");
        tr_tensor_free(dn), tr_tensor_free(df);
    }
    for (int i = 0; i < 2; i++) tr_tensor_free(a[i]), tr_tensor_free(b[i]), tr_tensor_free(dev[i]), free(h[i]), free(h2[i]);
    tr_tensor_free(norm), tr_tensor_free(flag);
}

/* The flag in a tensor agrees with scale_check_finite's host int, the values are its bits,
 * and a later clean call never clears a set flag. */
static void custom_scale_check_finite_into(int dtype, int device)
{
    static const int64_t shapes[2][2] = { { 5, 3 }, { 2, 0 } };
    static const int ndims[2] = { 2, 1 };
    tr_tensor *a[2], *b[2], *dev[2] = { 0 }, *flag = flag_on(0, TR_CPU), *df = NULL;
    double *h[2];
    list_make(a, h, 2, shapes, ndims, dtype, 1);
    for (int i = 0; i < 2; i++) b[i] = clone_on(a[i], TR_CPU);
    if (device != CPU_ONLY) {
        device_case_begin("scale_check_finite_into", device, dtype, 0);
        CHECK(list_to_device(dev, a, 2, device), "device tensors: %s", tr_ctx_errmsg(ctx));
        df = flag_on(0, device);
    }
    int found = -1;
    CHECK(tr_op_scale_check_finite(ctx, &found, b, 2, 0.5f) == TR_OK && found == 0, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_scale_check_finite_into(ctx, flag, a, 2, 0.5f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(i32_of(flag) == 0, "a finite list must leave the flag at 0");
    for (int i = 0; i < 2; i++) CHECK(same_bits(a[i], b[i]), "tensor %d differs from scale_check_finite's", i);
    if (device != CPU_ONLY) {
        CHECK(tr_op_scale_check_finite_into(ctx, df, dev, 2, 0.5f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(i32_of(df) == 0, "a finite list must leave the flag at 0 on %d", device);
        for (int i = 0; i < 2; i++) CHECK(same_bits(dev[i], b[i]), "tensor %d on %d differs from the CPU's", i, device);
    }
    h[1][1] = INFINITY;
    host_to_tensor(a[1], h[1]);
    CHECK(tr_op_scale_check_finite_into(ctx, flag, a, 2, 1.0f) == TR_OK && i32_of(flag) == 1, "an inf must be found");
    host_to_tensor(a[1], h[0]);
    CHECK(tr_op_scale_check_finite_into(ctx, flag, a, 2, 1.0f) == TR_OK && i32_of(flag) == 1,
          "a clean call cleared the flag");
    if (device != CPU_ONLY) {
        CHECK(tr_tensor_copy(ctx, dev[1], a[1]) == TR_OK, "copy: %s", tr_ctx_errmsg(ctx));
        h[1][1] = NAN;
        host_to_tensor(b[1], h[1]);
        CHECK(tr_tensor_copy(ctx, dev[1], b[1]) == TR_OK, "copy: %s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_scale_check_finite_into(ctx, df, dev, 2, 1.0f) == TR_OK && i32_of(df) == 1,
              "a NaN must be found on %d", device);
        device_case_end("flag and values agree with the CPU");
    }
    for (int i = 0; i < 2; i++) tr_tensor_free(a[i]), tr_tensor_free(b[i]), tr_tensor_free(dev[i]), free(h[i]);
    tr_tensor_free(flag), tr_tensor_free(df);
}

/* adamw_multi over three parameters (one past a CUDA chunk of 65536) for three steps against
 * tr_op_adamw per parameter: bit-identical on the CPU (params, m, v and the half copies of
 * dtype, with one parameter out of weight decay); a set skip flag changes nothing. On a
 * device: the same steps against the CPU's results (relative 1e-5; sqrt and division
 * are IEEE on both, but the compiler may contract the device's multiply-adds). */
enum { AM_N = 3 };
static void custom_adamw_multi(int dtype, int device)
{
    static const int64_t sizes[AM_N] = { 13, 1, 65537 + 6 };
    static const int32_t decay[AM_N] = { 1, 0, 1 };
    tr_tensor *p[2][AM_N], *g[AM_N], *m[2][AM_N], *v[2][AM_N], *hc[2][AM_N];
    tr_tensor *dp[AM_N] = { 0 }, *dg[AM_N] = { 0 }, *dm[AM_N] = { 0 }, *dv[AM_N] = { 0 }, *dh[AM_N] = { 0 };
    const int half = dtype != TR_F32;
    for (int i = 0; i < AM_N; i++) {
        double *x = dup(NULL, sizes[i]);
        for (int k = 0; k < 2; k++) {
            p[k][i] = vec(sizes[i], TR_F32, TR_CPU);
            m[k][i] = vec(sizes[i], TR_F32, TR_CPU);
            v[k][i] = vec(sizes[i], TR_F32, TR_CPU);
            hc[k][i] = half ? vec(sizes[i], dtype, TR_CPU) : NULL;
        }
        g[i] = vec(sizes[i], TR_F32, TR_CPU);
        oc_fill(x, sizes[i], 1);
        host_to_tensor(p[0][i], x), host_to_tensor(p[1][i], x);
        oc_fill(x, sizes[i], 0.1);
        host_to_tensor(m[0][i], x), host_to_tensor(m[1][i], x);
        for (int64_t e = 0; e < sizes[i]; e++) x[e] = fabs(x[e]) * 0.1;
        host_to_tensor(v[0][i], x), host_to_tensor(v[1][i], x);
        oc_fill(x, sizes[i], 2);
        host_to_tensor(g[i], x);
        free(x);
    }
    if (device != CPU_ONLY) {
        device_case_begin("adamw_multi", device, dtype, 0);
        for (int i = 0; i < AM_N; i++) {
            dp[i] = clone_on(p[0][i], device), dg[i] = clone_on(g[i], device);
            dm[i] = clone_on(m[0][i], device), dv[i] = clone_on(v[0][i], device);
            dh[i] = half ? clone_on(hc[0][i], device) : NULL;
            CHECK(dp[i] && dg[i] && dm[i] && dv[i] && (!half || dh[i]), "device tensors: %s", tr_ctx_errmsg(ctx));
        }
    }
    tr_tensor *skip = flag_on(0, TR_CPU), *dskip = device != CPU_ONLY ? flag_on(0, device) : NULL;
    for (int64_t step = 1; step <= 3; step++) {
        CHECK(tr_op_adamw_multi(ctx, p[0], g, m[0], v[0], half ? hc[0] : NULL, decay, AM_N, skip, 1e-2f, 0.9f, 0.999f,
                                1e-8f, 0.01f, step, 2.0f) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        for (int i = 0; i < AM_N; i++)
            CHECK(tr_op_adamw(ctx, p[1][i], g[i], m[1][i], v[1][i], hc[1][i], 1e-2f, 0.9f, 0.999f, 1e-8f,
                              decay[i] ? 0.01f : 0.0f, step, 2.0f) == TR_OK,
                  "%s", tr_ctx_errmsg(ctx));
        if (device != CPU_ONLY)
            CHECK(tr_op_adamw_multi(ctx, dp, dg, dm, dv, half ? dh : NULL, decay, AM_N, dskip, 1e-2f, 0.9f, 0.999f,
                                    1e-8f, 0.01f, step, 2.0f) == TR_OK,
                  "%s", tr_ctx_errmsg(ctx));
    }
    double worst = 0;
    for (int i = 0; i < AM_N; i++) {
        CHECK(same_bits(p[0][i], p[1][i]) && same_bits(m[0][i], m[1][i]) && same_bits(v[0][i], v[1][i]),
              "adamw_multi: parameter %d differs from tr_op_adamw's bits", i);
        if (half) CHECK(same_bits(hc[0][i], hc[1][i]), "adamw_multi: half copy %d differs", i);
        if (device != CPU_ONLY) {
            double e = rel_err(dp[i], p[1][i]);
            if (rel_err(dm[i], m[1][i]) > e) e = rel_err(dm[i], m[1][i]);
            if (rel_err(dv[i], v[1][i]) > e) e = rel_err(dv[i], v[1][i]);
            CHECK(e <= 1e-5, "adamw_multi on %d: parameter %d, error %.3g against the CPU", device, i, e);
            if (half) CHECK(rel_err(dh[i], hc[1][i]) <= 1e-2, "adamw_multi on %d: half copy %d", device, i);
            if (e > worst) worst = e;
        }
    }
    /* a set flag: nothing moves */
    tr_tensor *before = clone_on(p[0][2], TR_CPU), *mbefore = clone_on(m[0][2], TR_CPU);
    ((int32_t *)skip->data)[0] = 1;
    CHECK(tr_op_adamw_multi(ctx, p[0], g, m[0], v[0], NULL, NULL, AM_N, skip, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 4,
                            1.0f) == TR_OK,
          "%s", tr_ctx_errmsg(ctx));
    CHECK(same_bits(p[0][2], before) && same_bits(m[0][2], mbefore), "a set skip flag must leave the step undone");
    if (device != CPU_ONLY) {
        tr_tensor *dbefore = clone_on(dp[2], TR_CPU), *on = flag_on(1, device);
        CHECK(tr_op_adamw_multi(ctx, dp, dg, dm, dv, NULL, NULL, AM_N, on, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 4,
                                1.0f) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CHECK(same_bits(dp[2], dbefore), "a set device skip flag must leave the step undone on %d", device);
        char fig[120];
        snprintf(fig, sizeof fig, "max relative error %.3g after 3 steps, skip flag honoured", worst);
        device_case_end(fig);
        tr_tensor_free(dbefore), tr_tensor_free(on);
    }
    tr_tensor_free(before), tr_tensor_free(mbefore), tr_tensor_free(skip), tr_tensor_free(dskip);
    for (int i = 0; i < AM_N; i++) {
        for (int k = 0; k < 2; k++) tr_tensor_free(p[k][i]), tr_tensor_free(m[k][i]), tr_tensor_free(v[k][i]), tr_tensor_free(hc[k][i]);
        tr_tensor_free(g[i]), tr_tensor_free(dp[i]), tr_tensor_free(dg[i]), tr_tensor_free(dm[i]), tr_tensor_free(dv[i]),
            tr_tensor_free(dh[i]);
    }
}

/* ------------------------------------------------------------ the test */

/* One PASS/FAIL line per op of the table ("ops_table.<op>"), then the coverage count. */
/* The device loss scale: from 2^16 with growth 2, backoff 0.5 and interval 2, the
 * flags 0, 0, 1, 0 give the eager Scaler:update's numbers (131072 after two clean steps,
 * 65536 and one skip on the inf, tracker 1 after), inv = 1 / scale each time; the unscale
 * by that device inverse is scale_check_finite_into's bits; AdamW with the device skip count
 * (step 5, skipped 3, 1 of them known) is AdamW at step 3, bit for bit; a device runs the
 * same sequence to the same bits. Bad arguments are user errors naming them. */
static void custom_loss_scale_update(int dtype, int device)
{
    if (dtype != TR_F32) return; /* the state is f32 and i32 whatever the activations */
    int devs[2] = {TR_CPU, device};
    const int ndev = device != CPU_ONLY ? 2 : 1;
    float want_scale[4] = {65536.0f, 131072.0f, 65536.0f, 65536.0f};
    int32_t want_tracker[4] = {1, 0, 0, 1}, want_skipped[4] = {0, 0, 1, 1}, flags[4] = {0, 0, 1, 0};
    if (device != CPU_ONLY) device_case_begin("loss_scale_update", device, dtype, 0);
    for (int d = 0; d < ndev; d++) {
        tr_tensor *sc = vec(1, TR_F32, TR_CPU), *inv = vec(1, TR_F32, TR_CPU);
        ((float *)sc->data)[0] = 65536.0f;
        ((float *)inv->data)[0] = 1.0f / 65536.0f;
        tr_tensor *dsc = clone_on(sc, devs[d]), *dinv = clone_on(inv, devs[d]);
        tr_tensor *tracker = flag_on(0, devs[d]), *skipped = flag_on(0, devs[d]);
        for (int k = 0; k < 4; k++) {
            tr_tensor *fl = flag_on(flags[k], devs[d]);
            CHECK(tr_op_loss_scale_update(ctx, dsc, dinv, tracker, skipped, fl, 2.0f, 0.5f, 2) == TR_OK, "%s",
                  tr_ctx_errmsg(ctx));
            CHECK(f32_of(dsc) == want_scale[k] && f32_of(dinv) == 1.0f / want_scale[k] &&
                      i32_of(tracker) == want_tracker[k] && i32_of(skipped) == want_skipped[k],
                  "device %d step %d: scale %g inv %g tracker %d skipped %d", devs[d], k, (double)f32_of(dsc),
                  (double)f32_of(dinv), i32_of(tracker), i32_of(skipped));
            tr_tensor_free(fl);
        }
        /* the unscale by the device inverse: scale_check_finite_into's bits */
        double h[7] = {1, -2, 3.5, 1e-3, 7, -0.25, 65536};
        tr_tensor *g = vec(7, TR_F32, TR_CPU), *ref = vec(7, TR_F32, TR_CPU), *f0 = flag_on(0, TR_CPU);
        host_to_tensor(g, h), host_to_tensor(ref, h);
        tr_tensor *dg = clone_on(g, devs[d]), *df = flag_on(0, devs[d]);
        CHECK(tr_op_scale_check_finite_into(ctx, f0, &ref, 1, 1.0f / 65536.0f) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_scale_check_finite_by_into(ctx, df, &dg, 1, dinv) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(same_bits(dg, ref) && i32_of(df) == 0, "unscale by the device inverse differs on %d", devs[d]);
        /* AdamW's step from the device skip count: step 5 less (3 - 1) skips = step 3 */
        tr_tensor *p = vec(7, TR_F32, TR_CPU), *m = vec(7, TR_F32, TR_CPU), *v = vec(7, TR_F32, TR_CPU);
        host_to_tensor(p, h);
        double z[7] = {0};
        host_to_tensor(m, z), host_to_tensor(v, z);
        tr_tensor *rp = clone_on(p, TR_CPU), *rm = clone_on(m, TR_CPU), *rv = clone_on(v, TR_CPU);
        tr_tensor *dp = clone_on(p, devs[d]), *dm = clone_on(m, devs[d]), *dv = clone_on(v, devs[d]);
        tr_tensor *three = flag_on(3, devs[d]);
        CHECK(tr_op_adamw_multi(ctx, &rp, &ref, &rm, &rv, NULL, NULL, 1, NULL, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 3,
                                1.0f) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_adamw_multi_steps(ctx, &dp, &dg, &dm, &dv, NULL, NULL, 1, NULL, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f,
                                      5, 1.0f, three, 1) == TR_OK,
              "%s", tr_ctx_errmsg(ctx));
        if (devs[d] == TR_CPU)
            CHECK(same_bits(dp, rp) && same_bits(dm, rm) && same_bits(dv, rv), "adamw_multi_steps is not step 3's");
        else
            for (int i = 0; i < 7; i++) {
                tr_tensor *hp = clone_on(dp, TR_CPU);
                CHECK(hp && fabsf(((float *)hp->data)[i] - ((float *)rp->data)[i]) <=
                                1e-5f * fmaxf(1.0f, fabsf(((float *)rp->data)[i])),
                      "adamw_multi_steps element %d on %d", i, devs[d]);
                tr_tensor_free(hp);
            }
        tr_tensor_free(p), tr_tensor_free(m), tr_tensor_free(v), tr_tensor_free(rp), tr_tensor_free(rm);
        tr_tensor_free(rv), tr_tensor_free(dp), tr_tensor_free(dm), tr_tensor_free(dv), tr_tensor_free(three);
        tr_tensor_free(g), tr_tensor_free(ref), tr_tensor_free(f0), tr_tensor_free(dg), tr_tensor_free(df);
        tr_tensor_free(sc), tr_tensor_free(inv), tr_tensor_free(dsc), tr_tensor_free(dinv), tr_tensor_free(tracker);
        tr_tensor_free(skipped);
    }
    if (device != CPU_ONLY) device_case_end("the eager scaler's numbers, bit for bit");
    /* user errors */
    tr_tensor *sc = vec(1, TR_F32, TR_CPU), *inv = vec(1, TR_F32, TR_CPU), *t = flag_on(0, TR_CPU);
    tr_tensor *k = flag_on(0, TR_CPU), *fl = flag_on(0, TR_CPU), *bad = vec(1, TR_F32, TR_CPU);
    ((float *)sc->data)[0] = 1.0f;
    CHECK(tr_op_loss_scale_update(ctx, sc, inv, bad, k, fl, 2.0f, 0.5f, 2) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "tracker") && strstr(tr_ctx_errmsg(ctx), "one i32 element"),
          "an f32 tracker accepted: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_loss_scale_update(ctx, sc, inv, t, k, fl, 2.0f, 0.5f, 0) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "growth_interval"),
          "growth_interval 0 accepted: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_loss_scale_update(ctx, sc, inv, t, k, fl, 2.0f, -0.5f, 2) == TR_EUSER &&
              strstr(tr_ctx_errmsg(ctx), "backoff_factor"),
          "a negative backoff accepted: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(sc), tr_tensor_free(inv), tr_tensor_free(t), tr_tensor_free(k), tr_tensor_free(fl);
    tr_tensor_free(bad);
}

/* Why an op's CUDA cases do not run here, in words for the SKIP line. */
static const char *skip_cuda_reason(const tr_op_desc *desc, int ndev)
{
#ifdef TR_BUILD_HAS_CUDA
    const int build_has_cuda = 1;
#else
    const int build_has_cuda = 0;
#endif
    if (!tr_op_slot_of(desc, 0) && !build_has_cuda) return "no CUDA slot in this build (no nvcc)";
    if (ndev == 0)
        return tr_op_slot_of(desc, 0) ? "no GPU visible"
                                        : "no GPU visible (this sanitizer test program leaves the CUDA slots out; "
                                          "make test's CUDA-on-CPU stage runs them on the emulator)";
    if (!tr_op_slot_of(desc, 0)) return "this sanitizer test program leaves the CUDA slots out (build/rel has them)";
    return "the CUDA cases run with --cuda (tests/gpu/run.sh)";
}

/* x *= s[0] * factor is tr_op_scale by the f32 product, bit for bit in every dtype (the seed
 * scaled by the device loss scale / accumulate is the eager scale_(seed, S / k)); a device
 * gives the CPU's bits; s must be one element. */
static void custom_scale_by_scalar(int dtype, int device)
{
    double h[9] = {1, -2, 3.5, 1e-3, 7, -0.25, 3, 1e-5, -9};
    tr_tensor *x = vec(9, dtype, TR_CPU), *ref = vec(9, dtype, TR_CPU), *s = vec(1, TR_F32, TR_CPU);
    host_to_tensor(x, h), host_to_tensor(ref, h);
    ((float *)s->data)[0] = 1048576.0f;
    const float factor = 1.0f / 3.0f;
    tr_tensor *dx = NULL, *ds = NULL;
    if (device != CPU_ONLY) {
        device_case_begin("scale_by_scalar", device, dtype, 0);
        dx = clone_on(x, device), ds = clone_on(s, device);
    }
    CHECK(tr_op_scale(ctx, ref, ref, (float)(1048576.0 / 3.0)) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_scale_by_scalar(ctx, x, s, factor) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(same_bits(x, ref), "scale_by_scalar %s differs from scale by S / 3", tr_dtype_name(dtype));
    if (device != CPU_ONLY) {
        CHECK(tr_op_scale_by_scalar(ctx, dx, ds, factor) == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(same_bits(dx, ref), "scale_by_scalar %s on %d differs from the CPU", tr_dtype_name(dtype), device);
        device_case_end("bitwise equal to the CPU");
    }
    tr_tensor *two = vec(2, TR_F32, TR_CPU);
    CHECK(tr_op_scale_by_scalar(ctx, x, two, 1.0f) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "scale_by_scalar"),
          "a 2-element scalar accepted: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(x), tr_tensor_free(ref), tr_tensor_free(s), tr_tensor_free(dx), tr_tensor_free(ds);
    tr_tensor_free(two);
}

static void test_every_op_of_the_table(void)
{
    static char names[64][96];
    int covered = 0, ndev = tr_cuda_device_count(), n_ops = tr_op_count();
    for (int o = 0; o < n_ops; o++) {
        const tr_op_desc *desc = tr_op_at(o);
        const op_case *oc = find_case(desc->name);
        snprintf(names[o % 64], sizeof names[0], "ops_table.%s", desc->name);
        check_case_name = names[o % 64];
        check_case_failed = 0;
        CHECK(oc != NULL, "op %s of the table has no case in test_ops_table.c: add one", desc->name);
        oc_seed(1000 + (uint64_t)o);
        for (int di = 0; oc && di < 3; di++) {
            int dtype = dtypes[di];
            char what[128];
            if (oc->custom) {
                oc->custom(dtype, CPU_ONLY);
                continue;
            }
            for (int s = 0; s < oc->nd; s++) {
                snprintf(what, sizeof what, "%s %s shape %d", desc->name, tr_dtype_name(dtype), s);
                if (oc->fwd) run_backward(oc, desc, oc->dims[s], dtype, what);
                else run_forward(oc, desc, oc->dims[s], dtype, what);
            }
        }
        if (check_case_failed) {
            check_cases_failed++;
        } else {
            printf("PASS %s\n", check_case_name);
            covered++;
        }
        /* the CUDA cases run in the --cuda mode (tests/gpu/run.sh), on a GPU: here, one SKIP
         * line per op, never a pass, with the reason that holds: the sanitizer program of
         * make test leaves the CUDA slots out even where the build has them (TR_BUILD_HAS_CUDA:
         * the Makefile found nvcc), and then what keeps the cases from running is the GPU */
        printf("SKIP %s.cuda: %s\n", check_case_name, skip_cuda_reason(desc, ndev));
        skipped++;
        fflush(stdout);
    }
    check_case_name = "test_every_op_of_the_table";
    check_case_failed = 0;
    printf("ops_table: %d of the table's %d ops covered, %d backend cases skipped\n", covered, n_ops, skipped);
    CHECK(covered == n_ops, "covered %d of the table's %d ops", covered, n_ops);
    /* and no case describes an op the table lacks */
    for (int i = 0; i < N_CASES; i++) CHECK(tr_op_find(cases[i].op), "case %s names no op of the table", cases[i].op);
}

/* The table's own answers: every op runs on the CPU, none where no device exists. */
static void test_supported(void)
{
    for (int o = 0; o < tr_op_count(); o++) {
        const char *n = tr_op_name(o);
        CHECK(tr_op_supported(n, TR_CPU) == 1, "%s on the cpu", n);
        CHECK(tr_op_supported(n, tr_cuda_device_count()) == 0, "%s on a device that is not there", n);
        CHECK(tr_op_supported(n, -2) == 0, "%s on device -2", n);
        /* built: the slot is compiled in, device present or not (every op's CUDA slot in a
         * build with the CUDA backend, none without) */
        CHECK(tr_op_built(n, TR_CPU) == 1, "%s: no CPU slot", n);
        CHECK(tr_op_built(n, 0) == tr_cuda_built() && tr_op_built(n, 5) == tr_cuda_built(),
              "%s: CUDA slot built %d in a build with cuda %d", n, tr_op_built(n, 0), tr_cuda_built());
        CHECK(tr_op_built(n, -2) == 0, "%s built for device -2", n);
    }
    CHECK(tr_op_built("no_such_op", TR_CPU) == 0 && tr_op_built(NULL, 0) == 0, "built: unknown op");
    CHECK(tr_op_supported("no_such_op", TR_CPU) == 0, "unknown op");
    CHECK(tr_op_supported(NULL, TR_CPU) == 0, "NULL name");
    CHECK(tr_op_name(tr_op_count()) == NULL && tr_op_name(-1) == NULL, "names outside the table");
}

/* The dispatcher's rules, on one op each: NULL, device, dtype, and the one not-built
 * message for a device without a slot (a build without CUDA; a fake cuda tensor header is
 * enough, since no data is touched before the dispatch). A CUDA build reaches its slot,
 * which asks for the device: without one, the error names it. */
static void test_dispatch_rules(void)
{
    float buf[8] = { 0 };
    tr_tensor x = { .data = buf, .shape = { 2, 4 }, .numel = 8, .ndim = 2, .dtype = TR_F32, .device = TR_CPU };
    tr_tensor y = x, g = x, i32 = x;
    g.device = 0;
    i32.dtype = TR_I32;
    CHECK(tr_op_tanh(ctx, &y, NULL) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "tanh: x is NULL"), "%s",
          tr_ctx_errmsg(ctx));
    CHECK(tr_op_tanh(ctx, &y, &g) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "one device"), "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_tanh(ctx, &y, &i32) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "x has dtype i32"), "%s",
          tr_ctx_errmsg(ctx));
    tr_tensor gy = g;
    if (!tr_op_slot_of(tr_op_find("tanh"), 0)) {
        int rc = tr_op_tanh(ctx, &gy, &g);
        CHECK(rc == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "tanh: the CUDA path of this op is not built yet") &&
                  strstr(tr_ctx_errmsg(ctx), "cuda:0") && strstr(tr_ctx_errmsg(ctx), "device \"cpu\""),
              "%s", tr_ctx_errmsg(ctx));
    } else if (tr_cuda_device_count() == 0) {
        int rc = tr_op_tanh(ctx, &gy, &g);
        CHECK(rc == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "cuda:0"), "%s", tr_ctx_errmsg(ctx));
    }
    /* the shape check runs before the dispatch, on any device */
    tr_tensor g3 = g;
    g3.shape[1] = 3, g3.numel = 6;
    CHECK(tr_op_tanh(ctx, &g3, &g) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "must be [2, 4]"), "%s",
          tr_ctx_errmsg(ctx));
}

/* Device-only cases (shape numbers from 100): the head sizes the attention kernels keep in
 * registers (32, 64, 128) and those of the tensor-core kernels, dropout on the attention
 * probabilities (its masks must be the CPU's), and GEMM shapes of the sizes models use
 * (aligned) beside the table's odd ones. */
static const struct {
    const char *op;
    int64_t dims[9];
    float attn_dropout;
} device_extra[] = {
    { "attention", { 2, 37, 2, 32, 1 }, 0 },          { "attention", { 1, 19, 1, 64, 1 }, 0 },
    { "attention", { 1, 9, 2, 128, 0 }, 0 },          { "attention", { 2, 13, 2, 32, 1 }, 0.2f },
    { "attention_backward", { 2, 37, 2, 32, 1 }, 0 }, { "attention_backward", { 1, 19, 1, 64, 1 }, 0 },
    { "attention_backward", { 1, 9, 2, 128, 0 }, 0 }, { "attention_backward", { 2, 13, 2, 32, 1 }, 0.2f },
    /* bf16 and f16 run these on the tensor-core kernels (head sizes a multiple of 16 in
     * 32..128): several query blocks and key tiles, odd T, masks, dropout, D = 48 and 96
     * (fewer fragments than the kernel holds); D = 16 stays on the fp32-register kernels */
    { "attention", { 2, 70, 2, 64, 1 }, 0 },          { "attention", { 1, 33, 2, 128, 1 }, 0.1f },
    { "attention", { 1, 21, 3, 48, 0 }, 0 },          { "attention", { 2, 17, 1, 96, 1 }, 0.3f },
    { "attention", { 1, 5, 2, 16, 1 }, 0 },
    { "attention_backward", { 2, 70, 2, 64, 1 }, 0 }, { "attention_backward", { 1, 33, 2, 128, 1 }, 0.1f },
    { "attention_backward", { 1, 21, 3, 48, 0 }, 0 }, { "attention_backward", { 2, 17, 1, 96, 1 }, 0.3f },
    /* the forward's out given (the sixth number): read instead of recomputed, the same bits */
    { "attention_backward", { 2, 37, 2, 32, 1, 1 }, 0 }, { "attention_backward", { 2, 13, 2, 32, 1, 1 }, 0.2f },
    { "attention_backward", { 1, 9, 2, 128, 0, 1 }, 0 }, { "attention_backward", { 2, 70, 2, 64, 1, 1 }, 0 },
    { "attention_backward", { 1, 33, 2, 128, 1, 1 }, 0.1f }, { "attention_backward", { 2, 17, 1, 96, 1, 1 }, 0.3f },
    /* a relative-position bias (the seventh number, sh_attention): the scalar kernels and the
     * tensor-core ones (bf16, f16), forward and backward, masks and dropout */
    { "attention", { 2, 37, 2, 32, 1, 0, 1 }, 0 },    { "attention", { 2, 70, 2, 64, 1, 0, 1 }, 0.1f },
    { "attention", { 1, 9, 2, 128, 0, 0, 2 }, 0 },
    { "attention_backward", { 2, 37, 2, 32, 1, 0, 1 }, 0 }, { "attention_backward", { 2, 70, 2, 64, 1, 1, 1 }, 0.1f },
    { "attention_backward", { 1, 9, 2, 128, 0, 0, 2 }, 0 }, { "attention_backward", { 1, 33, 2, 64, 1, 0, 1 }, 0.2f },
    /* a window (the eighth number): the fp32-register kernels in every dtype, over several key
     * tiles and query blocks, with masks and dropout */
    { "attention", { 2, 70, 2, 64, 1, 0, 0, 5 }, 0 }, { "attention", { 1, 45, 2, 32, 1, 0, 0, 9 }, 0.1f },
    { "attention_backward", { 2, 70, 2, 64, 1, 1, 0, 5 }, 0 },
    { "attention_backward", { 1, 45, 2, 32, 1, 0, 0, 9 }, 0.1f },
    /* the first rows only (the ninth number): the register kernels (D 32, windows, a bias) and
     * the tensor-core ones (D 64, 128), over several query blocks, with dropout and out given */
    { "attention", { 2, 37, 2, 32, 1, 0, 0, 0, 1 }, 0.2f }, { "attention", { 2, 70, 2, 64, 1, 0, 0, 0, 17 }, 0 },
    { "attention", { 1, 45, 2, 32, 1, 0, 0, 9, 3 }, 0.1f }, { "attention", { 2, 37, 2, 32, 1, 0, 1, 0, 1 }, 0 },
    { "attention_backward", { 2, 37, 2, 32, 1, 0, 0, 0, 1 }, 0.2f },
    { "attention_backward", { 2, 70, 2, 64, 1, 1, 0, 0, 17 }, 0 },
    { "attention_backward", { 1, 33, 2, 128, 1, 0, 0, 0, 1 }, 0.1f },
    { "attention_backward", { 1, 45, 2, 32, 1, 0, 0, 9, 3 }, 0.1f },
    { "attention_backward", { 2, 37, 2, 32, 1, 0, 1, 0, 1 }, 0 },
    { "attention_packed", { 3, 2, 32 }, 0 },          { "attention_packed", { 4, 2, 64 }, 0 },
    { "attention_packed", { 4, 1, 128 }, 0 },
    { "matmul", { 0, 64, 96, 128, 0, 1 }, 0 },        { "matmul", { 3, 32, 64, 16, 1, 0 }, 0 },
    { "linear", { 48, 64, 96, 1 }, 0 },               { "linear_backward", { 48, 64, 96, 1 }, 0 },
    { "linear_backward_acc", { 48, 64, 96, 1, 0 }, 0 }, { "linear_backward_acc", { 40, 96, 64, 0, 1 }, 0 },
    /* BERT-sized rows: more columns than a block's threads, an odd hidden size, a padded row */
    { "dropout_add_layernorm", { 40, 384, 1, 10, 1 }, 0 }, { "dropout_add_layernorm", { 9, 1025, 0, 10, 0 }, 0 },
    { "dropout_add_layernorm_backward", { 40, 385, 1, 10, 1 }, 0 },
    { "bias_gelu", { 33, 1536, 1, 0 }, 0 }, { "bias_gelu_backward", { 33, 1537, 1, 1 }, 0 },
    /* the tanh form in cuBLASLt's GELU_AUX_BIAS epilogue (O a multiple of 8), with and without
     * the bias; the erf form composed */
    { "linear_gelu", { 48, 64, 96, 1, 1 }, 0 }, { "linear_gelu", { 40, 24, 32, 0, 1 }, 0 },
    { "linear_gelu", { 48, 64, 96, 1, 0 }, 0 },
    /* the tanh form in cuBLASLt's DGELU_BGRAD / DGELU epilogue (I a multiple of 8); erf composed */
    { "linear_backward_dgelu", { 48, 96, 64, 1, 1 }, 0 }, { "linear_backward_dgelu", { 40, 32, 24, 0, 1 }, 0 },
    { "linear_backward_dgelu", { 48, 96, 64, 1, 0 }, 0 },
    /* a LoRA site's shape: rows over two of the weight gradient's row chunks */
    { "dropout_linear", { 300, 256, 8, 10, 3 }, 0 }, { "dropout_linear_backward", { 300, 256, 8, 10, 3 }, 0 },
};
enum { N_DEVICE_EXTRA = (int)(sizeof device_extra / sizeof device_extra[0]) };

/* Every case of op o (its table cases and the device-only ones) on `device` against the CPU. */
static void device_cases_of(const tr_op_desc *desc, const op_case *oc, int o, int device)
{
    oc_seed(1000 + (uint64_t)o);
    for (int di = 0; di < 3; di++) {
        if (only_dtype >= 0 && dtypes[di] != only_dtype) continue;
        if (oc->custom) {
            if (dtypes[di] == TR_BF16 && card_lacks_bf16(device)) {
                printf("SKIP ops_table.%s.cuda bf16: cuda:%d has no bf16 (compute capability below 8.0); the other "
                       "ops' bf16 cases check that the CUDA slots decline it\n", desc->name, device);
                skipped++;
                continue;
            }
            oc->custom(dtypes[di], device);
            continue;
        }
        for (int s = 0; s < oc->nd; s++) run_on_device(oc, desc, oc->dims[s], dtypes[di], device, s, 0);
        for (int x = 0; x < N_DEVICE_EXTRA; x++)
            if (strcmp(device_extra[x].op, desc->name) == 0)
                run_on_device(oc, desc, device_extra[x].dims, dtypes[di], device, 100 + x,
                              device_extra[x].attn_dropout);
    }
}

/* --cuda [DTYPE]: every op's CUDA slot on every present device against its CPU slot, one
 * line per op, dtype and shape (the table's cases and the device-only ones; DTYPE, such
 * as f32, keeps one dtype); one SKIP line per op without a GPU. */
static void test_every_op_on_cuda(void)
{
    int ndev = tr_cuda_device_count(), n_ops = tr_op_count();
    for (int o = 0; o < n_ops; o++) {
        const tr_op_desc *desc = tr_op_at(o);
        const op_case *oc = find_case(desc->name);
        if (ndev == 0 || !oc) {
            printf("SKIP ops_table.%s.cuda: %s\n", desc->name,
                   !oc ? "no case in test_ops_table.c" : !tr_op_slot_of(desc, 0) ? "no CUDA slot in this build"
                                                                                    : "no CUDA device present");
            skipped++;
            continue;
        }
        for (int dev = 0; dev < ndev; dev++) {
            if (!tr_op_supported(desc->name, dev)) {
                device_case_begin(desc->name, dev, TR_F32, 0);
                CHECK(0, "%s has no CUDA slot in a build with the CUDA backend", desc->name);
                device_case_end("");
                continue;
            }
            device_cases_of(desc, oc, o, dev);
        }
    }
    printf("ops_table --cuda: %d passed, %d failed, %d skipped\n", device_cases_passed, device_cases_failed, skipped);
    check_case_name = "test_every_op_on_cuda";
    check_case_failed = 0;
    check_cases_failed += device_cases_failed;
}

/* The --cuda harness itself, with the CPU standing in for the device (CPU slot against CPU
 * slot): every case copies, runs, copies back and compares without a GPU, so the GPU run
 * meets a proven harness. Outputs must agree exactly, up to the f32 summation order of a
 * few reductions. */
static void test_device_harness_on_cpu(void)
{
    harness_quiet = 1;
    for (int o = 0; o < tr_op_count(); o++) {
        const op_case *oc = find_case(tr_op_at(o)->name);
        if (oc) device_cases_of(tr_op_at(o), oc, o, TR_CPU);
    }
    harness_quiet = 0;
    printf("ops_table: the device harness ran %d cases on the cpu, %d failed\n", device_cases_passed + device_cases_failed,
           device_cases_failed);
    check_case_name = "test_device_harness_on_cpu";
    check_case_failed = device_cases_failed;
    device_cases_passed = device_cases_failed = 0;
}

int main(int argc, char **argv)
{
    device_only = argc > 1 && strcmp(argv[1], "--cuda") == 0;
    for (int d = 0; device_only && argc > 2 && d < 3; d++)
        if (strcmp(argv[2], tr_dtype_name(dtypes[d])) == 0) only_dtype = dtypes[d];
    ctx = tr_ctx_new();
    if (!ctx) return 1;
    if (device_only) {
        test_every_op_on_cuda();
    } else {
        RUN(test_supported);
        RUN(test_dispatch_rules);
        RUN(test_every_op_of_the_table);
        RUN(test_device_harness_on_cpu);
    }
    tr_ctx_free(ctx);
    return check_done();
}
