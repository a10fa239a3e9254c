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
 * matmul converts whole operands. On Intel's AVX512-BF16 without AMX oneDNN's bf16 x bf16
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

/* ------------------------------------------------------------ matmul */

static int matmul_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *a, const tr_tensor *b, const tr_tensor *bias,
                      int trans_a, int trans_b, float alpha, float beta, const int64_t *dim)
{
    const int64_t M = dim[0], K = dim[1], N = dim[2], batch = dim[3];
    const int b_shared = (int)dim[4];
    int rc = TR_OK;
    {
        float *A = NULL, *B = NULL, *Bi = NULL, *C = NULL;
        void *oa = NULL, *ob = NULL, *obi = NULL, *oc = NULL;
        if ((rc = tr_stage_load(ctx, a, 0, a->numel, &A, &oa))) goto cpu_done;
        if ((rc = tr_stage_load(ctx, b, 0, b->numel, &B, &ob))) goto cpu_done;
        if (bias && (rc = tr_stage_load(ctx, bias, 0, N, &Bi, &obi))) goto cpu_done;
        if ((rc = tr_stage_buf(ctx, out, 0, out->numel, beta != 0, &C, &oc))) goto cpu_done;
        if (K == 0) /* an empty product: the BLAS kernel's bias and beta handling */
            rc = tr_k_matmul_fwd_f32(C, A, B, Bi, (int)batch, (int)M, (int)N, (int)K, trans_a, trans_b, alpha, beta,
                                     M * K, b_shared ? 0 : K * N, M * N, tr_ctx_err(ctx));
        /* one matrix shared by the batch: the batch is one product of batch * M rows */
        int64_t rows = b_shared && !trans_a ? batch * M : M, nmat = b_shared && !trans_a ? 1 : batch;
        if (rows > INT_MAX) rows = M, nmat = batch;
        for (int64_t bi = 0; K > 0 && bi < nmat && rc == TR_OK; bi++)
            rc = tr_cpu_gemm_f32(ctx, C + bi * M * N, A + bi * M * K, B + (b_shared ? 0 : bi * K * N), Bi, (int)rows,
                                 (int)N, (int)K, trans_a, trans_b, alpha, beta);
        if (rc == TR_OK) tr_stage_put(out, 0, C, out->numel);
    cpu_done:
        tr_stage_scratch_free(ctx, oa);
        tr_stage_scratch_free(ctx, ob);
        tr_stage_scratch_free(ctx, obi);
        tr_stage_scratch_free(ctx, oc);
        return rc;
    }
}

static int linear_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *x, const tr_tensor *w, const tr_tensor *bias,
                      const int64_t *dim)
{
    const int64_t O = dim[0], I = dim[1], N = dim[2];
    int rc = TR_OK;
    if (bf16_forward_native(ctx, x, w, out)) {
        float *Bi = NULL;
        void *obi = NULL;
        if (bias && (rc = tr_stage_load(ctx, bias, 0, O, &Bi, &obi))) return rc;
        if (N > 0)
            rc = tr_cpu_gemm_bf16(ctx, out->data, out->dtype, x->data, w->data, Bi, (int)N, (int)O, (int)I, 0, 1, 1.0f,
                                  0.0f);
        tr_stage_scratch_free(ctx, obi);
        return rc;
    }
    {
        float *W = NULL, *Bi = NULL;
        void *ow = NULL, *obi = NULL;
        const void *packed = NULL;
        if ((rc = tr_cpu_weight_packed(ctx, w, TR_PACK_FORWARD, &packed))) goto cpu_done;
        if (!packed && (rc = tr_stage_load(ctx, w, 0, w->numel, &W, &ow))) goto cpu_done;
        if (bias && (rc = tr_stage_load(ctx, bias, 0, O, &Bi, &obi))) goto cpu_done;
        /* f32 activations: one GEMM over every row; half: chunks of rows staged to f32 */
        int64_t step = (x->dtype == TR_F32 && out->dtype == TR_F32) ? (N > 0 ? N : 1)
                                                                    : even_rows(N, tr_stage_block_rows(I > O ? I : O));
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *X = NULL, *Y = NULL;
            void *ox = NULL, *oy = NULL;
            rc = tr_stage_load(ctx, x, r0 * I, nr * I, &X, &ox);
            if (rc == TR_OK) rc = tr_stage_buf(ctx, out, r0 * O, nr * O, 0, &Y, &oy);
            if (rc == TR_OK && packed)
                rc = tr_cpu_linear_forward_packed(ctx, Y, X, packed, Bi, (int)nr, (int)O, (int)I);
            else if (rc == TR_OK) /* an unpacked (half) weight: the router's plain product */
                rc = tr_cpu_gemm_f32(ctx, Y, X, W, Bi, (int)nr, (int)O, (int)I, 0, 1, 1.0f, 0.0f);
            if (rc == TR_OK) tr_stage_put(out, r0 * O, Y, nr * O);
            tr_stage_scratch_free(ctx, ox);
            tr_stage_scratch_free(ctx, oy);
        }
    cpu_done:
        tr_stage_scratch_free(ctx, ow);
        tr_stage_scratch_free(ctx, obi);
        return rc;
    }
}

static int linear_backward_run(tr_ctx *ctx, const tr_tensor *dx, const tr_tensor *dw, const tr_tensor *dbias,
                               const tr_tensor *dout, const tr_tensor *x, const tr_tensor *w, const int64_t *dim)
{
    const int64_t O = dim[0], I = dim[1], N = dim[2];
    int rc = TR_OK;
    if (!dx && !dw && !dbias) return TR_OK;
    /* bf16 dout, w and x: the products native (dx = dout W, dw += dout^T x into the f32
     * gradient), and dout staged only for the bias gradient's column sums */
    if (bf16_backward_native(ctx, dx, dw, dout, x, w)) {
        if (dx && N > 0)
            rc = tr_cpu_gemm_bf16(ctx, dx->data, dx->dtype, dout->data, w->data, NULL, (int)N, (int)I, (int)O, 0, 0,
                                  1.0f, 0.0f);
        if (rc == TR_OK && dw && N > 0)
            rc = tr_cpu_gemm_bf16(ctx, dw->data, TR_F32, dout->data, x->data, NULL, (int)O, (int)I, (int)N, 1, 0, 1.0f,
                                  1.0f);
        int64_t step = even_rows(N, tr_stage_block_rows(O));
        for (int64_t r0 = 0; dbias && r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *D = NULL;
            void *od = NULL;
            rc = tr_stage_load(ctx, dout, r0 * O, nr * O, &D, &od);
            if (rc == TR_OK) tr_k_bias_bwd_f32(dbias->data, D, nr, O);
            tr_stage_scratch_free(ctx, od);
        }
        return rc;
    }
    {
        float *W = NULL;
        void *ow = NULL;
        const void *packed = NULL;
        if (dx && (rc = tr_cpu_weight_packed(ctx, w, TR_PACK_INPUT_GRAD, &packed))) return rc;
        if (dx && !packed && (rc = tr_stage_load(ctx, w, 0, w->numel, &W, &ow))) return rc;
        int all_f32 = dout->dtype == TR_F32 && (!dx || dx->dtype == TR_F32) && (!dw || x->dtype == TR_F32);
        int64_t step = all_f32 ? (N > 0 ? N : 1) : even_rows(N, tr_stage_block_rows(I > O ? I : O));
        for (int64_t r0 = 0; r0 < N && rc == TR_OK; r0 += step) {
            int64_t nr = N - r0 < step ? N - r0 : step;
            float *D = NULL, *DX = NULL, *X = NULL;
            void *od = NULL, *odx = NULL, *ox = NULL;
            rc = tr_stage_load(ctx, dout, r0 * O, nr * O, &D, &od);
            if (rc == TR_OK && dx) {
                rc = tr_stage_buf(ctx, dx, r0 * I, nr * I, 0, &DX, &odx);
                if (rc == TR_OK && packed)
                    rc = tr_cpu_linear_input_grad_packed(ctx, DX, D, packed, (int)nr, (int)O, (int)I);
                else if (rc == TR_OK)
                    rc = tr_cpu_gemm_f32(ctx, DX, D, W, NULL, (int)nr, (int)I, (int)O, 0, 0, 1.0f, 0.0f);
                if (rc == TR_OK) tr_stage_put(dx, r0 * I, DX, nr * I);
            }
            if (rc == TR_OK && dw) {
                rc = tr_stage_load(ctx, x, r0 * I, nr * I, &X, &ox);
                if (rc == TR_OK) rc = tr_cpu_gemm_f32(ctx, dw->data, D, X, NULL, (int)O, (int)I, (int)nr, 1, 0, 1, 1);
            }
            if (rc == TR_OK && dbias) tr_k_bias_bwd_f32(dbias->data, D, nr, O);
            tr_stage_scratch_free(ctx, od);
            tr_stage_scratch_free(ctx, odx);
            tr_stage_scratch_free(ctx, ox);
        }
        tr_stage_scratch_free(ctx, ow);
        return rc;
    }
}

int tr_cpu_matmul(tr_ctx *ctx, tr_op_call *c)
{
    return matmul_run(ctx, c->matmul.out, c->matmul.a, c->matmul.b, c->matmul.bias, (int)c->i[0], (int)c->i[1], c->f[0],
                      c->f[1], c->dim);
}

int tr_cpu_linear(tr_ctx *ctx, tr_op_call *c)
{
    return linear_run(ctx, c->linear.out, c->linear.x, c->linear.w, c->linear.bias, c->dim);
}

int tr_cpu_linear_backward(tr_ctx *ctx, tr_op_call *c)
{
    return linear_backward_run(ctx, c->linear_backward.dx, c->linear_backward.dw, c->linear_backward.dbias,
                               c->linear_backward.dout, c->linear_backward.x, c->linear_backward.w, c->dim);
}
