/* activation_cpu.c — the CPU slots of GELU (and ReLU, its kind 2), softmax and tanh over kernels/cpu/activation.c
 * and softmax.c. Half tensors are converted to f32 span by span on each thread for
 * GELU and tanh, and staged in chunks of rows for softmax (whose sums are always f32). */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/activation.h"
#include "cpu/softmax.h"

enum { ACT_GELU_FWD, ACT_GELU_BWD, ACT_SOFTMAX_FWD, ACT_SOFTMAX_BWD, ACT_TANH_FWD, ACT_TANH_BWD };

/* One span of an elementwise kind in f32 (n <= TR_STAGE_SPAN: the kernels then run it on
 * the calling thread, no OpenMP region of their own). */
static void elementwise_f32(int kind, int arg, float *Y, const float *A, const float *B, int64_t n)
{
    switch (kind) {
    case ACT_GELU_FWD:
        tr_k_gelu_fwd_f32(Y, A, n, arg);
        break;
    case ACT_GELU_BWD:
        tr_k_gelu_bwd_f32(Y, A, B, n, arg);
        break;
    case ACT_TANH_FWD:
        tr_k_tanh_fwd_f32(Y, A, n);
        break;
    default:
        tr_k_tanh_bwd_f32(Y, A, B, n);
        break;
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

/* The six ops lay out their arguments alike: y (out or dx, written), a (x or dout), b (x, y
 * or none), all in blocks of rows for the staging loop. */
static const unsigned char layout[TR_OP_MAX_TENSORS] = {TR_ROWS_BLOCK, TR_ROWS_BLOCK, TR_ROWS_BLOCK};

typedef struct rows_kind {
    int kind, arg;
} rows_kind;

static int rows_fn(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    const rows_kind *k = work;
    if (k->kind == ACT_SOFTMAX_FWD)
        tr_k_softmax_fwd_f32(p[0], p[1], nr, C);
    else if (k->kind == ACT_SOFTMAX_BWD)
        tr_k_softmax_bwd_f32(p[0], p[1], p[2], nr, C);
    else
        elementwise_f32(k->kind, k->arg, p[0], p[1], p[2], nr * C);
    return TR_OK;
}

/* y (=) = f(a [, b]): half elementwise operands span by span, else blocks of rows of width C
 * (1 for elementwise). */
static int run(tr_ctx *ctx, const tr_op_call *c, const tr_op_desc *d, int kind)
{
    const tr_tensor *y = c->gelu_backward.dx, *a = c->gelu_backward.dout, *b = c->gelu_backward.x;
    int rowwise = kind == ACT_SOFTMAX_FWD || kind == ACT_SOFTMAX_BWD;
    int arg = c->i[0] == TR_OP_ACT_RELU ? TR_GELU_RELU : c->i[0] == TR_OP_GELU_TANH ? TR_GELU_TANH : TR_GELU_ERF;
    int all_f32 = y->dtype == TR_F32 && a->dtype == TR_F32 && (!b || b->dtype == TR_F32);
    if (!rowwise && !all_f32) {
        span_kind k = {kind, arg};
        tr_stage_spans(y, a, b, span_fn, &k);
        return TR_OK;
    }
    int64_t C = rowwise ? (a->ndim ? a->shape[a->ndim - 1] : 1) : 1;
    int64_t N = C > 0 ? a->numel / C : 0;
    rows_kind k = {kind, arg};
    return tr_stage_rows(ctx, d, c, layout, N, C, rows_fn, &k);
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(gelu, run, c, &tr_opd_gelu, ACT_GELU_FWD)
TR_CPU_SLOT_BY(gelu_backward, run, c, &tr_opd_gelu_backward, ACT_GELU_BWD)
TR_CPU_SLOT_BY(softmax, run, c, &tr_opd_softmax, ACT_SOFTMAX_FWD)
TR_CPU_SLOT_BY(softmax_backward, run, c, &tr_opd_softmax_backward, ACT_SOFTMAX_BWD)
TR_CPU_SLOT_BY(tanh, run, c, &tr_opd_tanh, ACT_TANH_FWD)
TR_CPU_SLOT_BY(tanh_backward, run, c, &tr_opd_tanh_backward, ACT_TANH_BWD)
