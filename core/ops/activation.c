/* activation.c — tensor-level GELU (erf and tanh forms), softmax over the last dim
 * and tanh (kernels/cpu/gelu.c, softmax.c, tanh.c): their op-table descriptions, shape
 * checks and CPU slots, and the public wrappers. Half tensors are converted to f32 span by
 * span on each thread for GELU and tanh, and staged in chunks of rows for softmax (whose
 * sums are always f32). tanh's backward reads the forward's output y, so callers keep y
 * rather than x. */
#include "ops_nn.h"
#include "op_stage.h"
#include "op_cuda.h"
#include "op_table.h"
#include "cpu/gelu.h"
#include "cpu/softmax.h"
#include "cpu/tanh.h"

enum { ACT_GELU_FWD, ACT_GELU_BWD, ACT_SOFTMAX_FWD, ACT_SOFTMAX_BWD, ACT_TANH_FWD, ACT_TANH_BWD };

/* ------------------------------------------------------------ shared check and driver */

/* t[0] = y, t[1] = a, t[2] = b (backward only): one shape. */
static int same_shapes(tr_ctx *ctx, tr_op_call *c, const tr_op_desc *d)
{
    const tr_tensor *a = c->t[1];
    int rc;
    for (int i = 0; i < d->nargs; i++)
        if (i != 1 && (rc = tr_op_want_shape(ctx, d->name, d->args[i].name, c->t[i], a->ndim, a->shape))) return rc;
    return TR_OK;
}

/* One span of an elementwise kind in f32 (n <= TR_STAGE_SPAN: the kernels then run it on
 * the calling thread, no OpenMP region of their own). */
static void elementwise_f32(int kind, int arg, float *Y, const float *A, const float *B, int64_t n)
{
    switch (kind) {
    case ACT_GELU_FWD: tr_k_gelu_fwd_f32(Y, A, n, arg); break;
    case ACT_GELU_BWD: tr_k_gelu_bwd_f32(Y, A, B, n, arg); break;
    case ACT_TANH_FWD: tr_k_tanh_fwd_f32(Y, A, n); break;
    default: tr_k_tanh_bwd_f32(Y, A, B, n); break;
    }
}

/* Half operands of an elementwise kind go span by span on each thread (tr_stage_spans, which
 * says why); the f32 values and the kernel are the staged path's, so the bits are too. */
typedef struct span_kind {
    int kind, arg;
} span_kind;

static void span_fn(const void *p, float *y, const float *a, const float *b, int64_t n)
{
    const span_kind *k = p;
    elementwise_f32(k->kind, k->arg, y, a, b, n);
}

/* y (=) = f(a [, b]) chunk by chunk; rows of width C (1 for elementwise). */
static int run(tr_ctx *ctx, const tr_op_call *c, int kind)
{
    const tr_tensor *y = c->t[0], *a = c->t[1], *b = c->t[2];
    int rowwise = kind == ACT_SOFTMAX_FWD || kind == ACT_SOFTMAX_BWD, rc = TR_OK;
    int arg = c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
    int all_f32 = y->dtype == TR_F32 && a->dtype == TR_F32 && (!b || b->dtype == TR_F32);
    if (!rowwise && !all_f32) {
        span_kind k = { kind, arg };
        tr_stage_spans(y, a, b, span_fn, &k);
        return TR_OK;
    }
    int64_t C = rowwise ? (a->ndim ? a->shape[a->ndim - 1] : 1) : 1;
    int64_t N = C > 0 ? a->numel / C : 0;
    int64_t step = all_f32 ? (N > 0 ? N : 1) : tr_stage_block_rows(C);
    for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
        int64_t nr = N - r0 < step ? N - r0 : step, off = r0 * C, n = nr * C;
        float *A = NULL, *B = NULL, *Y = NULL;
        void *oa = NULL, *ob = NULL, *oy = NULL;
        rc = tr_stage_load(ctx, a, off, n, &A, &oa);
        if (rc == TR_OK && b) rc = tr_stage_load(ctx, b, off, n, &B, &ob);
        if (rc == TR_OK) rc = tr_stage_buf(ctx, y, off, n, 0, &Y, &oy);
        if (rc == TR_OK) {
            if (kind == ACT_SOFTMAX_FWD) tr_k_softmax_fwd_f32(Y, A, nr, C);
            else if (kind == ACT_SOFTMAX_BWD) tr_k_softmax_bwd_f32(Y, A, B, nr, C);
            else elementwise_f32(kind, arg, Y, A, B, n);
            tr_stage_put(y, off, Y, n);
        }
        tr_stage_scratch_free(ctx, oa);
        tr_stage_scratch_free(ctx, ob);
        tr_stage_scratch_free(ctx, oy);
    }
    return rc;
}

static int gelu_kind_check(tr_ctx *ctx, tr_op_call *c, const tr_op_desc *d)
{
    if (c->i[0] != TR_OP_GELU_ERF && c->i[0] != TR_OP_GELU_TANH)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: GELU kind %lld is unknown: use 0 (erf, BERT's \"gelu\") or 1 (tanh, "
                       "\"gelu_new\" / \"gelu_pytorch_tanh\")",
                       d->name, (long long)c->i[0]);
    return same_shapes(ctx, c, d);
}

/* ------------------------------------------------------------ the op table */

#define Y_A(y, a) { { y, TR_ARG_OUT, TR_DT_FLOAT, 0 }, { a, TR_ARG_IN, TR_DT_FLOAT, 0 } }
#define Y_A_B(y, a, b) \
    { { y, TR_ARG_OUT, TR_DT_FLOAT, 0 }, { a, TR_ARG_IN, TR_DT_FLOAT, 0 }, { b, TR_ARG_IN, TR_DT_FLOAT, 0 } }

/* One description, shape check and CPU slot per op; the slot names the kernel. */
#define ACT_OP(name, nargs, args, check_fn, kind)                                                      \
    static int name##_check(tr_ctx *ctx, tr_op_call *c) { return check_fn(ctx, c, &tr_opd_##name); } \
    static int name##_cpu(tr_ctx *ctx, tr_op_call *c) { return run(ctx, c, kind); }                    \
    const tr_op_desc tr_opd_##name = { #name, nargs, args, name##_check, { name##_cpu, TR_CUDA_SLOT(name) } };

extern const tr_op_desc tr_opd_gelu, tr_opd_gelu_backward, tr_opd_softmax, tr_opd_softmax_backward, tr_opd_tanh,
    tr_opd_tanh_backward;

ACT_OP(gelu, 2, Y_A("out", "x"), gelu_kind_check, ACT_GELU_FWD)
ACT_OP(gelu_backward, 3, Y_A_B("dx", "dout", "x"), gelu_kind_check, ACT_GELU_BWD)
ACT_OP(softmax, 2, Y_A("out", "x"), same_shapes, ACT_SOFTMAX_FWD)
ACT_OP(softmax_backward, 3, Y_A_B("dx", "dout", "y"), same_shapes, ACT_SOFTMAX_BWD)
ACT_OP(tanh, 2, Y_A("out", "x"), same_shapes, ACT_TANH_FWD)
ACT_OP(tanh_backward, 3, Y_A_B("dx", "dout", "y"), same_shapes, ACT_TANH_BWD)

/* ------------------------------------------------------------ public wrappers */

static int call2(tr_ctx *ctx, const tr_op_desc *d, const tr_tensor *y, const tr_tensor *a, int kind)
{
    tr_op_call c = { .t = { y, a }, .i = { kind } };
    return tr_op_run(ctx, d, &c);
}

static int call3(tr_ctx *ctx, const tr_op_desc *d, const tr_tensor *y, const tr_tensor *a, const tr_tensor *b,
                 int kind)
{
    tr_op_call c = { .t = { y, a, b }, .i = { kind } };
    return tr_op_run(ctx, d, &c);
}

int tr_op_gelu(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, int kind)
{
    return call2(ctx, &tr_opd_gelu, out, x, kind);
}

int tr_op_gelu_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *x, int kind)
{
    return call3(ctx, &tr_opd_gelu_backward, dx, dout, x, kind);
}

int tr_op_softmax(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x) { return call2(ctx, &tr_opd_softmax, out, x, 0); }

int tr_op_softmax_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y)
{
    return call3(ctx, &tr_opd_softmax_backward, dx, dout, y, 0);
}

int tr_op_tanh(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x) { return call2(ctx, &tr_opd_tanh, out, x, 0); }

int tr_op_tanh_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, const tr_tensor *y)
{
    return call3(ctx, &tr_opd_tanh_backward, dx, dout, y, 0);
}
