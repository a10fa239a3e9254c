/* test_multi_tensor.c — the argument errors of the device-resident list ops
 * (core/ops/ops_multi_tensor.h): each a TR_EUSER naming the op, the argument and the fix,
 * with nothing written. Their values are test_ops_table.c's cases. */
#include "check.h"
#include "ctx_check.h"

#include "trainer.h"

#include <string.h>

static tr_ctx *ctx;

static tr_tensor *vec(int64_t n, int dtype)
{
    tr_tensor *t = tr_tensor_new(ctx, 1, &n, dtype, TR_CPU, TR_TAG_GRADS);
    if (t) memset(t->data, 0, tr_tensor_nbytes(t));
    return t;
}

static int says(const char *what)
{
    return strstr(tr_ctx_errmsg(ctx), what) != NULL;
}

static void test_flag_must_be_one_i32(void)
{
    tr_tensor *g = vec(4, TR_F32), *f = vec(1, TR_F32), *two = vec(2, TR_I32);
    tr_tensor *list[1] = {g};
    ((float *)g->data)[0] = 3;
    CHECK(tr_op_scale_check_finite_into(ctx, f, list, 1, 2.0f) == TR_EUSER, "an f32 flag accepted");
    CHECK(says("scale_check_finite_into") && says("found_inf") && says("one i32 element"), "%s", tr_ctx_errmsg(ctx));
    CHECK(((float *)g->data)[0] == 3, "a refused call scaled the gradients");
    CHECK(tr_op_scale_check_finite_into(ctx, two, list, 1, 2.0f) == TR_EUSER, "a 2-element flag accepted");
    tr_tensor_free(g), tr_tensor_free(f), tr_tensor_free(two);
}

static void test_clip_checks_norm_and_max_norm(void)
{
    tr_tensor *g = vec(4, TR_F32), *norm = vec(2, TR_F32), *one = vec(1, TR_F32);
    tr_tensor *list[1] = {g};
    CHECK(tr_op_clip_by_norm(ctx, list, 1, norm, NULL, 1.0f, 1e-6f) == TR_EUSER, "a 2-element norm accepted");
    CHECK(says("clip_by_norm") && says("norm"), "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_clip_by_norm(ctx, list, 1, one, NULL, 0.0f, 1e-6f) == TR_EUSER, "max_norm 0 accepted");
    CHECK(says("grad_clip"), "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_global_norm_into(ctx, norm, list, 1) == TR_EUSER && says("global_norm_into"), "%s", tr_ctx_errmsg(ctx));
    tr_tensor *bad[2] = {g, NULL};
    CHECK(tr_op_clip_by_norm(ctx, bad, 2, one, NULL, 1.0f, 1e-6f) == TR_EUSER && says("tensor 1 is NULL"), "%s",
          tr_ctx_errmsg(ctx));
    tr_tensor_free(g), tr_tensor_free(norm), tr_tensor_free(one);
}

static void test_adamw_multi_checks_every_list(void)
{
    tr_tensor *p0 = vec(3, TR_F32), *p1 = vec(5, TR_F32), *g0 = vec(3, TR_F32), *g1 = vec(4, TR_F32);
    tr_tensor *m0 = vec(3, TR_F32), *m1 = vec(5, TR_F32), *v0 = vec(3, TR_F32), *v1 = vec(5, TR_F32);
    tr_tensor *hg = vec(5, TR_BF16);
    tr_tensor *ps[2] = {p0, p1}, *gs[2] = {g0, g1}, *ms[2] = {m0, m1}, *vs[2] = {v0, v1};
    ((float *)p0->data)[0] = 1;
    ((float *)g0->data)[0] = 1;
    CHECK(tr_op_adamw_multi(ctx, ps, gs, ms, vs, NULL, NULL, 2, NULL, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1) == TR_EUSER,
          "a grad of another size accepted");
    CHECK(says("adamw_multi: parameter 1 has 5 elements"), "%s", tr_ctx_errmsg(ctx));
    CHECK(((float *)p0->data)[0] == 1, "a refused call updated parameter 0");
    gs[1] = hg;
    CHECK(tr_op_adamw_multi(ctx, ps, gs, ms, vs, NULL, NULL, 2, NULL, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1) ==
                  TR_EUSER &&
              says("grad 1 has dtype bf16 but must be f32"),
          "%s", tr_ctx_errmsg(ctx));
    gs[1] = g0, ps[1] = p0, ms[1] = m0, vs[1] = v0;
    CHECK(tr_op_adamw_multi(ctx, ps, gs, ms, vs, NULL, NULL, 2, NULL, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0, 1) ==
                  TR_EUSER &&
              says("steps count from 1"),
          "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_adamw_multi(ctx, ps, gs, ms, vs, NULL, NULL, 1, hg, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1) == TR_EUSER &&
              says("skip_if"),
          "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_adamw_multi(ctx, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1) ==
              TR_OK,
          "an empty list: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(p0), tr_tensor_free(p1), tr_tensor_free(g0), tr_tensor_free(g1), tr_tensor_free(m0);
    tr_tensor_free(m1), tr_tensor_free(v0), tr_tensor_free(v1), tr_tensor_free(hg);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_flag_must_be_one_i32), CASE(test_clip_checks_norm_and_max_norm),
        CASE(test_adamw_multi_checks_every_list)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
