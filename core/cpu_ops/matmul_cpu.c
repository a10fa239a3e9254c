/* matmul_cpu.c — the CPU slots (checks and wrappers: core/ops/matmul.c): tensor-level matmul and Linear (forward and
 * backward) on the CPU, over oneDNN or OpenBLAS as cpu_gemm.h routes each product.
 *
 * Half-precision operands: a Linear over bf16 activations and a bf16 weight runs natively
 * where bf16 kernels beat f32 (tr_cpu_gemm_bf16_native: AMX, or AVX512-BF16 on AMD), f32
 * accumulation inside oneDNN. Everywhere else half operands are staged to f32 and the GEMM
 * runs in f32 with f32 accumulation: Linear converts its activations in chunks of rows, and
 * its weight once per pack (oneDNN: the packed copy is made from the f32 conversion and kept
 * until the weight changes) or once per call (a half weight, which is not packed: its
 * staged f32 copy goes to the router's plain product, oneDNN or OpenBLAS); the general
 * matmul converts a tall product's rows in blocks as Linear does (matmul_tall_half), other
 * products' operands whole. On Intel's AVX512-BF16 without AMX oneDNN's bf16 x bf16
 * product is slower than f32 (measured 130-167 against 263-284 GFLOP/s on a Xeon with
 * AVX512-BF16), and cblas_sbgemm is not exported by Debian's OpenBLAS 0.3.21, see
 * bench/bench_gemm.c. */
#include "ops_nn.h"
#include "cpu_slot.h"
#include "cpu_gemm.h"

#include <limits.h>
#include "cpu/matmul.h"
#include <stdio.h>
#include <string.h>

/* Whether a Linear's forward runs natively in bf16 (cpu_gemm.h): x and w bf16, out bf16 or
 * f32, on a CPU and library that have it. Elsewhere half operands are staged to f32 in
 * blocks of rows. */
static int bf16_forward_native(tr_ctx *ctx, const tr_tensor *x, const tr_tensor *w, const tr_tensor *out)
{
    return x->dtype == TR_BF16 && w->dtype == TR_BF16 && (out->dtype == TR_BF16 || out->dtype == TR_F32) &&
           tr_cpu_gemm_bf16_native(ctx);
}

/* The backward's twin: dout bf16; dx (if asked) from a bf16 w into bf16 or f32; dw (if
 * asked) from a bf16 x into the f32 gradient. */
static int bf16_backward_native(tr_ctx *ctx, const tr_tensor *dx, const tr_tensor *dw, const tr_tensor *dout,
                                const tr_tensor *x, const tr_tensor *w)
{
    if (dout->dtype != TR_BF16 || (!dx && !dw)) return 0;
    if (dx && (w->dtype != TR_BF16 || (dx->dtype != TR_BF16 && dx->dtype != TR_F32))) return 0;
    if (dw && (x->dtype != TR_BF16 || dw->dtype != TR_F32)) return 0;
    return tr_cpu_gemm_bf16_native(ctx);
}

/* Rows per GEMM for N rows of half activations staged in blocks of at most `most` rows:
 * the blocks made equal (4096 rows of 1536 in 7 blocks of 586, not 6 of 682 and one of
 * 4: a 4-row product ran at 6 GFLOP/s), so no block exceeds the staging bound. */
static int64_t even_rows(int64_t N, int64_t most)
{
    if (N <= most) return N > 0 ? N : 1;
    int64_t blocks = (N + most - 1) / most;
    return (N + blocks - 1) / blocks;
}

/* What a block's products need beside the staged pointers: the context (the GEMM router),
 * the weight's packed form (NULL: the staged weight), the sizes and, for linear_backward,
 * the input gradient's beta (0: dx = dout W; 1: dx += dout W, linear_backward_acc). */
typedef struct gemm_run {
    tr_ctx *ctx;
    const void *packed;
    const int64_t *dim;
    float dx_beta;
} gemm_run;

/* ------------------------------------------------------------ matmul */

#define MM(name) TR_ARGI(matmul, name)

/* Whole operands (one row for the staging loop); out is read only for beta != 0. */
static int matmul_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *work)
{
    const gemm_run *g = work;
    const int64_t M = g->dim[0], K = g->dim[1], N = g->dim[2], batch = g->dim[3];
    const int b_shared = (int)g->dim[4], trans_a = (int)c->i[0], trans_b = (int)c->i[1];
    const float alpha = c->f[0], beta = c->f[1];
    float *C = p[MM(out)];
    const float *A = p[MM(a)], *B = p[MM(b)], *Bi = p[MM(bias)];
    int rc = TR_OK;
    if (K == 0) /* an empty product: the BLAS kernel's bias and beta handling */
        rc = tr_k_matmul_fwd_f32(C, A, B, Bi, (int)batch, (int)M, (int)N, (int)K, trans_a, trans_b, alpha, beta, M * K,
                                 b_shared ? 0 : K * N, M * N, tr_ctx_err(g->ctx));
    /* one matrix shared by the batch: the batch is one product of batch * M rows */
    int64_t rows = b_shared && !trans_a ? batch * M : M, nmat = b_shared && !trans_a ? 1 : batch;
    if (rows > INT_MAX) rows = M, nmat = batch;
    for (int64_t bi = 0; K > 0 && bi < nmat && rc == TR_OK; bi++)
        rc = tr_cpu_gemm_f32(g->ctx, C + bi * M * N, A + bi * M * K, B + (b_shared ? 0 : bi * K * N), Bi, (int)rows,
                             (int)N, (int)K, trans_a, trans_b, alpha, beta);
    return rc;
}

/* A block of rows of a tall product (rows of a are rows of out): nr rows of the GEMM. */
static int matmul_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t unused, void *work)
{
    const gemm_run *g = work;
    return tr_cpu_gemm_f32(g->ctx, p[MM(out)], p[MM(a)], p[MM(b)], p[MM(bias)], (int)nr, (int)g->dim[2],
                           (int)g->dim[1], 0, (int)c->i[1], c->f[0], c->f[1]);
}

/* Whether the product is one matrix of rows (a not transposed; one matrix, or b shared by the
 * batch) with a or out in half precision: then out and a are staged in blocks of rows (a
 * LoRA adapter's y += scale a B^T into a [tokens, out] bf16 y, da = dy B), not whole. */
static int matmul_tall_half(const tr_op_call *c)
{
    const int64_t K = c->dim[1], batch = c->dim[3];
    const int b_shared = (int)c->dim[4];
    return !c->i[0] && (batch == 1 || b_shared) && K > 0 &&
           (c->matmul.a->dtype != TR_F32 || c->matmul.out->dtype != TR_F32);
}

int tr_cpu_matmul(tr_ctx *ctx, tr_op_call *c)
{
    if (matmul_tall_half(c)) {
        const unsigned char rows_layout[TR_OP_MAX_TENSORS] = {
            [MM(out)] = TR_ROWS_BLOCK, [MM(a)] = TR_ROWS_BLOCK, [MM(b)] = TR_ROWS_WHOLE, [MM(bias)] = TR_ROWS_WHOLE,
        };
        const int64_t R = c->dim[0] * c->dim[3], wide = c->dim[1] > c->dim[2] ? c->dim[1] : c->dim[2];
        if (R <= INT_MAX) {
            gemm_run g = {ctx, NULL, c->dim, 0.0f};
            return tr_stage_rows_by(ctx, &tr_opd_matmul, c, rows_layout, R, 1,
                                    even_rows(R, tr_stage_rows_step(&tr_opd_matmul, c, rows_layout, R, wide)),
                                    matmul_rows, &g);
        }
    }
    const unsigned char layout[TR_OP_MAX_TENSORS] = {
        [MM(out)] = c->f[1] != 0 ? TR_ROWS_WHOLE : TR_ROWS_FRESH,
        [MM(a)] = TR_ROWS_WHOLE,
        [MM(b)] = TR_ROWS_WHOLE,
        [MM(bias)] = TR_ROWS_WHOLE,
    };
    gemm_run g = {ctx, NULL, c->dim, 0.0f};
    return tr_stage_rows(ctx, &tr_opd_matmul, c, layout, 1, 1, matmul_whole, &g);
}

/* ------------------------------------------------------------ linear */

#define LF(name) TR_ARGI(linear, name)
#define LB(name) TR_ARGI(linear_backward, name)

/* The rows per block of a Linear over N rows of I inputs and O outputs: every row when the
 * staged activations are f32, else blocks of at most the staging bound, made equal. */
static int64_t linear_step(const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout)
{
    const int64_t O = c->dim[0], I = c->dim[1], N = c->dim[2];
    return even_rows(N, tr_stage_rows_step(d, c, layout, N, I > O ? I : O));
}

/* bf16 x and w natively (the bias staged whole, one row for the staging loop). */
static int linear_native_whole(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused,
                               void *work)
{
    const gemm_run *g = work;
    const int64_t O = g->dim[0], I = g->dim[1], N = g->dim[2];
    if (N == 0) return TR_OK;
    return tr_cpu_gemm_bf16(g->ctx, c->linear.out->data, c->linear.out->dtype, c->linear.x->data, c->linear.w->data,
                            p[LF(bias)], (int)N, (int)O, (int)I, 0, 1, 1.0f, 0.0f);
}

static int linear_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t unused, void *work)
{
    const gemm_run *g = work;
    const int O = (int)g->dim[0], I = (int)g->dim[1];
    if (g->packed)
        return tr_cpu_linear_forward_packed(g->ctx, p[LF(out)], p[LF(x)], g->packed, p[LF(bias)], (int)nr, O, I);
    /* an unpacked (half) weight: the router's plain product */
    return tr_cpu_gemm_f32(g->ctx, p[LF(out)], p[LF(x)], p[LF(w)], p[LF(bias)], (int)nr, O, I, 0, 1, 1.0f, 0.0f);
}

int tr_cpu_linear(tr_ctx *ctx, tr_op_call *c)
{
    const tr_op_desc *d = &tr_opd_linear;
    gemm_run g = {ctx, NULL, c->dim, 0.0f};
    int rc;
    if (bf16_forward_native(ctx, c->linear.x, c->linear.w, c->linear.out)) {
        static const unsigned char bias_only[TR_OP_MAX_TENSORS] = {[LF(bias)] = TR_ROWS_WHOLE};
        return tr_stage_rows(ctx, d, c, bias_only, 1, 1, linear_native_whole, &g);
    }
    if ((rc = tr_cpu_weight_packed(ctx, c->linear.w, TR_PACK_FORWARD, &g.packed))) return rc;
    /* f32 activations: one GEMM over every row; half: blocks of rows staged to f32 */
    const unsigned char layout[TR_OP_MAX_TENSORS] = {
        [LF(out)] = TR_ROWS_BLOCK,
        [LF(x)] = TR_ROWS_BLOCK,
        [LF(w)] = g.packed ? 0 : TR_ROWS_WHOLE,
        [LF(bias)] = TR_ROWS_WHOLE,
    };
    rc = tr_stage_rows_by(ctx, d, c, layout, c->dim[2], 1, linear_step(d, c, layout), linear_rows, &g);
    if (g.packed) tr_cpu_weight_pack_done(c->linear.w, TR_PACK_FORWARD);
    return rc;
}

/* dbias += the column sums of dout (the bf16 path's products take dout as it is). */
static int dbias_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t unused, void *work)
{
    tr_k_bias_bwd_f32(p[LB(dbias)], p[LB(dout)], nr, c->dim[0]);
    return TR_OK;
}

/* dx = dout W + beta dx, dw += dout^T x, dbias += column sums of dout, over a block of rows
 * (dx staged in for beta 1: linear_backward_acc's dx is ACC). */
static int linear_backward_rows(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t unused,
                                void *work)
{
    const gemm_run *g = work;
    const int O = (int)g->dim[0], I = (int)g->dim[1];
    const float *D = p[LB(dout)];
    int rc = TR_OK;
    if (p[LB(dx)] && g->packed)
        rc = tr_cpu_linear_input_grad_packed(g->ctx, p[LB(dx)], D, g->packed, (int)nr, O, I, g->dx_beta);
    else if (p[LB(dx)])
        rc = tr_cpu_gemm_f32(g->ctx, p[LB(dx)], D, p[LB(w)], NULL, (int)nr, I, O, 0, 0, 1.0f, g->dx_beta);
    if (rc == TR_OK && p[LB(dw)]) rc = tr_cpu_gemm_f32(g->ctx, p[LB(dw)], D, p[LB(x)], NULL, O, I, (int)nr, 1, 0, 1, 1);
    if (rc == TR_OK && p[LB(dbias)]) tr_k_bias_bwd_f32(p[LB(dbias)], D, nr, O);
    return rc;
}

/* Both forms: d is linear_backward's description (dx OUT, dx_beta 0) or linear_backward_acc's
 * (dx ACC, dx_beta 1), whose arguments are in the same order, so LB() indexes either. On every
 * path the product itself takes beta: oneDNN's sum post-op (native bf16, packed, plain) or the
 * BLAS's beta, into dx staged in (a half dx) or dx itself (f32), so dx rounds once. */
static int linear_backward_cpu(tr_ctx *ctx, const tr_op_desc *d, tr_op_call *c, float dx_beta)
{
    const tr_tensor *dx = c->t[LB(dx)], *dw = c->t[LB(dw)], *dbias = c->t[LB(dbias)], *dout = c->t[LB(dout)],
                    *x = c->t[LB(x)], *w = c->t[LB(w)];
    const int64_t O = c->dim[0], I = c->dim[1], N = c->dim[2];
    gemm_run g = {ctx, NULL, c->dim, dx_beta};
    int rc = TR_OK;
    if (!dx && !dw && !dbias) return TR_OK;
    /* bf16 dout, w and x: the products native (dx = dout W, dw += dout^T x into the f32
     * gradient), and dout staged only for the bias gradient's column sums */
    if (bf16_backward_native(ctx, dx, dw, dout, x, w)) {
        static const unsigned char dbias_layout[TR_OP_MAX_TENSORS] = {[LB(dbias)] = TR_ROWS_DIRECT,
                                                                      [LB(dout)] = TR_ROWS_BLOCK};
        if (dx && N > 0)
            rc = tr_cpu_gemm_bf16(ctx, dx->data, dx->dtype, dout->data, w->data, NULL, (int)N, (int)I, (int)O, 0, 0,
                                  1.0f, dx_beta);
        if (rc == TR_OK && dw && N > 0)
            rc = tr_cpu_gemm_bf16(ctx, dw->data, TR_F32, dout->data, x->data, NULL, (int)O, (int)I, (int)N, 1, 0, 1.0f,
                                  1.0f);
        if (rc == TR_OK && dbias)
            rc =
                tr_stage_rows_by(ctx, d, c, dbias_layout, N, 1, even_rows(N, tr_stage_block_rows(O)), dbias_rows, NULL);
        return rc;
    }
    if (dx && (rc = tr_cpu_weight_packed(ctx, w, TR_PACK_INPUT_GRAD, &g.packed))) return rc;
    const unsigned char layout[TR_OP_MAX_TENSORS] = {
        [LB(dx)] = TR_ROWS_BLOCK,   [LB(dw)] = TR_ROWS_DIRECT,        [LB(dbias)] = TR_ROWS_DIRECT,
        [LB(dout)] = TR_ROWS_BLOCK, [LB(x)] = dw ? TR_ROWS_BLOCK : 0, [LB(w)] = dx && !g.packed ? TR_ROWS_WHOLE : 0,
    };
    rc = tr_stage_rows_by(ctx, d, c, layout, N, 1, linear_step(d, c, layout), linear_backward_rows, &g);
    if (g.packed) tr_cpu_weight_pack_done(w, TR_PACK_INPUT_GRAD);
    return rc;
}

int tr_cpu_linear_backward(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_cpu(ctx, &tr_opd_linear_backward, c, 0.0f);
}

_Static_assert(TR_ARGI(linear_backward, dx) == TR_ARGI(linear_backward_acc, dx) &&
                   TR_ARGI(linear_backward, w) == TR_ARGI(linear_backward_acc, w),
               "linear_backward and linear_backward_acc take their tensors in one order");

int tr_cpu_linear_backward_acc(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_cpu(ctx, &tr_opd_linear_backward_acc, c, 1.0f);
}
