/* test_stage_rows.c — the CPU slots' staging loop (core/cpu_ops/stage_rows.h) on its own:
 *   - f32 tensors reach the kernel as their own memory, in one block of every row;
 *   - half tensors go in blocks of tr_stage_block_rows(C) rows, read by role (IN and ACC
 *     converted in, OUT and ACC converted back) and each argument's row is numel / N of its
 *     elements (a Linear's I-wide input and O-wide output in one loop);
 *   - TR_ROWS_ONE points at row r0 of the tensor's own data whatever its dtype (an i32 mask);
 *   - TR_ROWS_FRESH and TR_ROWS_WHOLE write a whole ACC operand back after the loop;
 *   - an error from the kernel ends the loop: its block is not written back, the error is
 *     returned, and no workspace is left. */
#include "check.h"
#include "ctx_check.h"
#include "tensor_check.h"

#include "op_stage.h"
#include "stage_rows.h"

#include <string.h>

static tr_ctx *ctx;

/* What the kernel saw: one entry per block. */
typedef struct seen {
    int calls;
    int64_t r0[16], nr[16];
    const float *p[16][TR_OP_MAX_TENSORS];
    int fail_at; /* the block that returns TR_EUSER, or -1 */
} seen;

static void record(seen *s, float *const *p, int64_t r0, int64_t nr)
{
    if (s->calls < 16) {
        s->r0[s->calls] = r0, s->nr[s->calls] = nr;
        for (int i = 0; i < TR_OP_MAX_TENSORS; i++) s->p[s->calls][i] = p[i];
    }
    s->calls++;
}

/* layernorm's places: out (OUT) = 2 x (IN) + weight (IN, whole). */
#define LN(name) TR_ARGI(layernorm, name)

static int twice_plus_weight(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    seen *s = work;
    record(s, p, r0, nr);
    if (s->calls - 1 == s->fail_at) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "test: block %d fails", s->fail_at);
    for (int64_t i = 0; i < nr * C; i++) p[LN(out)][i] = 2 * p[LN(x)][i] + p[LN(weight)][i % C];
    return TR_OK;
}

static const unsigned char ln_layout[TR_OP_MAX_TENSORS] = {
    [LN(out)] = TR_ROWS_BLOCK, [LN(x)] = TR_ROWS_BLOCK, [LN(weight)] = TR_ROWS_WHOLE};

static tr_tensor *filled(int ndim, const int64_t *shape, int dtype, double scale)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = scale * (double)((i * 7) % 13 - 6);
    tr_tensor *t = tc_tensor(ctx, ndim, shape, dtype, v);
    free(v);
    return t;
}

/* out against 2 x + weight computed in f32 and rounded to out's dtype. */
static void check_twice(const tr_tensor *out, const tr_tensor *x, const tr_tensor *w, int64_t C, int64_t rows)
{
    float *o = tc_values_f32(out), *xv = tc_values_f32(x), *wv = tc_values_f32(w);
    int64_t bad = 0;
    for (int64_t i = 0; i < rows * C; i++) {
        float want = 2 * xv[i] + wv[i % C], got = want;
        uint16_t h;
        if (out->dtype != TR_F32) {
            tr_convert(&h, out->dtype, &want, TR_F32, 1);
            tr_convert(&got, TR_F32, &h, out->dtype, 1);
        }
        bad += memcmp(&got, &o[i], sizeof got) != 0;
    }
    CHECK(bad == 0, "%lld of %lld elements differ", (long long)bad, (long long)(rows * C));
    free(o), free(xv), free(wv);
}

static void test_f32_passes_through(void)
{
    int64_t sh[2] = {5, 3}, shc[1] = {3};
    tr_tensor *x = filled(2, sh, TR_F32, 0.5), *out = filled(2, sh, TR_F32, 0), *w = filled(1, shc, TR_F32, 1);
    tr_op_call c = {.t = {out, NULL, NULL, x, w}};
    seen s = {.fail_at = -1};
    int rc = tr_stage_rows(ctx, &tr_opd_layernorm, &c, ln_layout, 5, 3, twice_plus_weight, &s);
    CHECK(rc == TR_OK, "rc %d", rc);
    CHECK(s.calls == 1 && s.r0[0] == 0 && s.nr[0] == 5, "%d calls, first r0 %lld nr %lld", s.calls, (long long)s.r0[0],
          (long long)s.nr[0]);
    CHECK(s.p[0][LN(out)] == out->data && s.p[0][LN(x)] == x->data && s.p[0][LN(weight)] == w->data,
          "an f32 tensor was copied");
    CHECK(s.p[0][LN(mean)] == NULL, "an argument without a layout got a pointer");
    check_twice(out, x, w, 3, 5);
    tc_no_workspace_left(ctx, "f32 rows");
    tr_tensor_free(x), tr_tensor_free(out), tr_tensor_free(w);
}

static void test_half_blocks(void)
{
    const int64_t N = 2500, C = 1000, step = tr_stage_block_rows(C);
    int64_t sh[2] = {N, C}, shc[1] = {C};
    tr_tensor *x = filled(2, sh, TR_BF16, 0.25), *out = filled(2, sh, TR_F16, 0), *w = filled(1, shc, TR_BF16, 1);
    tr_op_call c = {.t = {out, NULL, NULL, x, w}};
    seen s = {.fail_at = -1};
    int rc = tr_stage_rows(ctx, &tr_opd_layernorm, &c, ln_layout, N, C, twice_plus_weight, &s);
    CHECK(rc == TR_OK, "rc %d", rc);
    CHECK(s.calls == (int)((N + step - 1) / step), "%d blocks of %lld rows for %lld rows", s.calls, (long long)step,
          (long long)N);
    for (int k = 0; k < s.calls && k < 16; k++)
        CHECK(s.r0[k] == k * step && s.nr[k] == (N - k * step < step ? N - k * step : step),
              "block %d: r0 %lld nr %lld", k, (long long)s.r0[k], (long long)s.nr[k]);
    CHECK(s.p[0][LN(x)] != x->data && s.p[0][LN(out)] != out->data, "a half tensor reached the kernel unconverted");
    check_twice(out, x, w, C, N);
    tc_no_workspace_left(ctx, "half rows");
    tr_tensor_free(x), tr_tensor_free(out), tr_tensor_free(w);
}

/* linear's places: out [N, O] (OUT) = the first O of each x row [N, I] (IN), I > O. */
#define LF(name) TR_ARGI(linear, name)

static int first_cols(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t unused, void *work)
{
    const int64_t O = c->linear.out->shape[1], I = c->linear.x->shape[1];
    record(work, p, r0, nr);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t o = 0; o < O; o++) p[LF(out)][r * O + o] = p[LF(x)][r * I + o];
    return TR_OK;
}

static void test_widths_per_argument(void)
{
    const int64_t N = 7, I = 5, O = 2;
    int64_t shx[2] = {N, I}, sho[2] = {N, O};
    tr_tensor *x = filled(2, shx, TR_BF16, 1), *out = filled(2, sho, TR_BF16, 0);
    tr_op_call c = {.t = {out, x}};
    const unsigned char layout[TR_OP_MAX_TENSORS] = {[LF(out)] = TR_ROWS_BLOCK, [LF(x)] = TR_ROWS_BLOCK};
    seen s = {.fail_at = -1};
    int rc = tr_stage_rows_by(ctx, &tr_opd_linear, &c, layout, N, 1, 3, first_cols, &s);
    CHECK(rc == TR_OK && s.calls == 3 && s.nr[2] == 1, "rc %d, %d blocks, last of %lld rows", rc, s.calls,
          (long long)s.nr[2]);
    float *o = tc_values_f32(out), *xv = tc_values_f32(x);
    int bad = 0;
    for (int64_t r = 0; r < N; r++)
        for (int64_t k = 0; k < O; k++) bad += o[r * O + k] != xv[r * I + k];
    CHECK(bad == 0, "%d output elements are not their row's input", bad);
    free(o), free(xv);
    tc_no_workspace_left(ctx, "rows of two widths");
    tr_tensor_free(x), tr_tensor_free(out);
}

/* attention's places: the mask [B, T] i32 in place, one block per batch element. */
static int note(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work)
{
    record(work, p, r0, nr);
    return TR_OK;
}

static void test_one_in_place(void)
{
    const int64_t B = 4, T = 3;
    int64_t sh[2] = {B, T};
    tr_tensor *mask = filled(2, sh, TR_I32, 1);
    tr_op_call c = {.t = {[TR_ARGI(attention, mask)] = mask}};
    const unsigned char layout[TR_OP_MAX_TENSORS] = {[TR_ARGI(attention, mask)] = TR_ROWS_ONE};
    seen s = {.fail_at = -1};
    int rc = tr_stage_rows_by(ctx, &tr_opd_attention, &c, layout, B, T, 1, note, &s);
    CHECK(rc == TR_OK && s.calls == B, "rc %d, %d blocks", rc, s.calls);
    for (int k = 0; k < s.calls && k < 16; k++)
        CHECK((const void *)s.p[k][TR_ARGI(attention, mask)] == (const int32_t *)mask->data + k * T,
              "block %d does not point at its mask row", k);
    tr_tensor_free(mask);
}

/* matmul's out is ACC: WHOLE converts it in and back, FRESH only back. */
static int add_one(const tr_op_call *c, float *const *p, int64_t r0, int64_t one, int64_t unused, void *fresh)
{
    float *o = p[TR_ARGI(matmul, out)];
    for (int64_t i = 0; i < c->matmul.out->numel; i++) o[i] = *(const int *)fresh ? 1 : o[i] + 1;
    return TR_OK;
}

static void test_whole_acc(void)
{
    int64_t sh[2] = {3, 4};
    for (int fresh = 0; fresh < 2; fresh++) {
        tr_tensor *out = filled(2, sh, TR_BF16, 1);
        float *before = tc_values_f32(out);
        tr_op_call c = {.t = {out}};
        const unsigned char layout[TR_OP_MAX_TENSORS] = {[TR_ARGI(matmul, out)] =
                                                             fresh ? TR_ROWS_FRESH : TR_ROWS_WHOLE};
        int rc = tr_stage_rows(ctx, &tr_opd_matmul, &c, layout, 1, 1, add_one, &fresh);
        float *after = tc_values_f32(out);
        int bad = 0;
        for (int64_t i = 0; i < out->numel; i++) bad += after[i] != (fresh ? 1 : before[i] + 1);
        CHECK(rc == TR_OK && bad == 0, "fresh %d: rc %d, %d elements wrong", fresh, rc, bad);
        free(before), free(after);
        tr_tensor_free(out);
    }
    tc_no_workspace_left(ctx, "whole ACC operands");
}

static void test_error_ends_the_loop(void)
{
    const int64_t N = 3000, C = 1000, step = tr_stage_block_rows(C);
    int64_t sh[2] = {N, C}, shc[1] = {C};
    tr_tensor *x = filled(2, sh, TR_BF16, 0.25), *out = filled(2, sh, TR_BF16, 0), *w = filled(1, shc, TR_BF16, 1);
    tr_op_call c = {.t = {out, NULL, NULL, x, w}};
    seen s = {.fail_at = 1};
    int rc = tr_stage_rows(ctx, &tr_opd_layernorm, &c, ln_layout, N, C, twice_plus_weight, &s);
    CHECK(rc == TR_EUSER && s.calls == 2, "rc %d after %d blocks", rc, s.calls);
    check_twice(out, x, w, C, step); /* the first block went back */
    float *o = tc_values_f32(out);
    int64_t touched = 0;
    for (int64_t i = step * C; i < N * C; i++) touched += o[i] != 0;
    CHECK(touched == 0, "%lld elements after the failed block were written", (long long)touched);
    free(o);
    tc_no_workspace_left(ctx, "a failing kernel");
    tr_tensor_free(x), tr_tensor_free(out), tr_tensor_free(w);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_f32_passes_through), CASE(test_half_blocks), CASE(test_widths_per_argument),
        CASE(test_one_in_place),       CASE(test_whole_acc),   CASE(test_error_ends_the_loop),
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
