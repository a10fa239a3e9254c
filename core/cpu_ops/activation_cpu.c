/* activation_cpu.c — the CPU slots of GELU, softmax and tanh over kernels/cpu/gelu.c,
 * softmax.c and tanh.c. Half tensors are converted to f32 span by span on each thread for
 * GELU and tanh, and staged in chunks of rows for softmax (whose sums are always f32). */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu/gelu.h"
#include "cpu/softmax.h"
#include "cpu/tanh.h"

enum { ACT_GELU_FWD, ACT_GELU_BWD, ACT_SOFTMAX_FWD, ACT_SOFTMAX_BWD, ACT_TANH_FWD, ACT_TANH_BWD };

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
    /* the six ops lay out their arguments alike: y (out or dx), a (x or dout), b (x, y or none) */
    const tr_tensor *y = c->gelu_backward.dx, *a = c->gelu_backward.dout, *b = c->gelu_backward.x;
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

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(gelu, run, c, ACT_GELU_FWD)
TR_CPU_SLOT_BY(gelu_backward, run, c, ACT_GELU_BWD)
TR_CPU_SLOT_BY(softmax, run, c, ACT_SOFTMAX_FWD)
TR_CPU_SLOT_BY(softmax_backward, run, c, ACT_SOFTMAX_BWD)
TR_CPU_SLOT_BY(tanh, run, c, ACT_TANH_FWD)
TR_CPU_SLOT_BY(tanh_backward, run, c, ACT_TANH_BWD)
