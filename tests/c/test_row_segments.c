/* test_row_segments.c — packed <-> padded rows and packed dropout (core/ops/row_segments.c):
 * gather then scatter gives the padded tensor back with 0 in the gaps (f32, and gathering
 * into bf16), on one thread and, above 1 MiB, shared among threads; packed dropout and its backward equal the padded dropout's real rows bit for
 * bit; a bad segment table is TR_EUSER naming the segment and writes nothing. */
#include "check.h"
#include "ctx_check.h"
#include "trainer.h"

#include <string.h>

static tr_ctx *ctx;

/* padded [B=3, T=4, C=5]: rows 0-1 (seq 0), 4-7 (seq 1, full: one run with nothing else),
 * 8 (seq 2); as runs: (packed 0, 2 rows, padded 0), (2, 5, 4) — rows 4..8 are consecutive. */
static const int64_t SEGS[6] = {0, 2, 0, 2, 5, 4};
enum { R = 12, C = 5, N = 7 };

static tr_tensor *filled(int64_t rows, int dtype, float base)
{
    int64_t shape[2] = {rows, C};
    tr_tensor *t = tr_tensor_new(ctx, 2, shape, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    CHECK(t != NULL, "alloc");
    float v[R * C];
    for (int64_t i = 0; i < rows * C; i++) v[i] = base + (float)i * 0.25f - 3.0f;
    CHECK(tr_tensor_write(ctx, t, v, (size_t)(rows * C) * 4) == TR_OK, "write");
    if (dtype == TR_F32) return t;
    tr_tensor *h = tr_tensor_new(ctx, 2, shape, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    CHECK(tr_tensor_copy(ctx, h, t) == TR_OK, "copy");
    tr_tensor_free(t);
    return h;
}

static int padded_row_is_real(int64_t r)
{
    return r <= 1 || (r >= 4 && r <= 8);
}

static void test_gather_scatter_round_trip(void)
{
    tr_tensor *x = filled(R, TR_F32, 1.0f), *p = filled(N, TR_F32, 0.0f), *back = filled(R, TR_F32, 9.0f);
    CHECK(tr_op_gather_segments(ctx, p, x, SEGS, 2) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_scatter_segments(ctx, back, p, SEGS, 2) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    const float *xv = x->data, *pv = p->data, *bv = back->data;
    int64_t k = 0;
    for (int64_t r = 0; r < R; r++) {
        if (padded_row_is_real(r)) {
            for (int c = 0; c < C; c++) CHECK(pv[k * C + c] == xv[r * C + c], "packed row %lld", (long long)k);
            k++;
        }
        for (int c = 0; c < C; c++) {
            float want = padded_row_is_real(r) ? xv[r * C + c] : 0.0f;
            CHECK(bv[r * C + c] == want, "padded row %lld col %d: %g, want %g", (long long)r, c, bv[r * C + c], want);
        }
    }
    CHECK(k == N, "%lld real rows", (long long)k);
    /* a converting gather: bf16 out of f32 */
    tr_tensor *hb = filled(N, TR_BF16, 0.0f);
    CHECK(tr_op_gather_segments(ctx, hb, x, SEGS, 2) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    const uint16_t *hv = hb->data;
    for (int64_t i = 0; i < N * C; i++) CHECK(hv[i] == tr_f32_to_bf16(pv[i]), "bf16 element %lld", (long long)i);
    tr_tensor_free(hb);
    tr_tensor_free(x);
    tr_tensor_free(p);
    tr_tensor_free(back);
}

/* Above 1 MiB the host runs are shared among threads, each scatter run clearing the gap
 * before it (and the last one the tail): a gap before the first run, between every pair, and
 * after the last, with the output full of 9s beforehand, all come back 0; the real rows equal
 * the source's. */
static void test_large_runs_threaded(void)
{
    enum { LC = 512, LR = 1200, NSEG = 4 };
    /* (packed row, rows, padded row) */
    static const int64_t segs[3 * NSEG] = { 0, 5, 2, 5, 290, 300, 295, 120, 600, 415, 1, 900 };
    const int64_t LN = 416, xs[2] = { LR, LC }, ps[2] = { LN, LC };
    tr_tensor *x = tr_tensor_new(ctx, 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    tr_tensor *p = tr_tensor_new(ctx, 2, ps, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    tr_tensor *back = tr_tensor_new(ctx, 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    CHECK(x && p && back, "alloc");
    float *xv = x->data, *bv = back->data, *pv = p->data;
    for (int64_t i = 0; i < LR * LC; i++) {
        xv[i] = (float)(i % 977) + 0.5f;
        bv[i] = 9.0f;
    }
    CHECK(tr_op_gather_segments(ctx, p, x, segs, NSEG) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_op_scatter_segments(ctx, back, p, segs, NSEG) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    int64_t bad = 0, first_bad = -1;
    for (int64_t r = 0; r < LR; r++) {
        int64_t pr = -1;
        for (int s = 0; s < NSEG; s++)
            if (r >= segs[3 * s + 2] && r < segs[3 * s + 2] + segs[3 * s + 1]) pr = segs[3 * s] + r - segs[3 * s + 2];
        for (int64_t c = 0; c < LC; c++) {
            float want = pr >= 0 ? xv[r * LC + c] : 0.0f;
            int ok = bv[r * LC + c] == want && (pr < 0 || pv[pr * LC + c] == want);
            if (!ok && first_bad < 0) first_bad = r;
            bad += !ok;
        }
    }
    CHECK(bad == 0, "%lld wrong elements, first in padded row %lld", (long long)bad, (long long)first_bad);
    tr_tensor_free(x);
    tr_tensor_free(p);
    tr_tensor_free(back);
}

static void test_packed_dropout_is_the_padded_mask(void)
{
    tr_rng_key key = {.seed = 21, .step = 3, .layer = 2, .op = 1};
    tr_tensor *x = filled(R, TR_F32, 2.0f), *full = filled(R, TR_F32, 0.0f);
    tr_tensor *p = filled(N, TR_F32, 0.0f), *d = filled(N, TR_F32, 0.0f), *want = filled(N, TR_F32, 0.0f);
    for (int backward = 0; backward < 2; backward++) {
        int rc =
            backward ? tr_op_dropout_backward(ctx, full, x, 0.4f, &key, 0) : tr_op_dropout(ctx, full, x, 0.4f, &key, 0);
        CHECK(rc == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(tr_op_gather_segments(ctx, p, x, SEGS, 2) == TR_OK, "gather x");
        CHECK(tr_op_gather_segments(ctx, want, full, SEGS, 2) == TR_OK, "gather the padded dropout");
        rc = backward ? tr_op_dropout_segments_backward(ctx, d, p, 0.4f, &key, SEGS, 2)
                      : tr_op_dropout_segments(ctx, d, p, 0.4f, &key, SEGS, 2);
        CHECK(rc == TR_OK, "%s", tr_ctx_errmsg(ctx));
        CHECK(memcmp(d->data, want->data, (size_t)(N * C) * 4) == 0, "backward %d: masks differ", backward);
        int dropped = 0;
        for (int64_t i = 0; i < N * C; i++) dropped += ((const float *)d->data)[i] == 0.0f;
        CHECK(dropped > 0 && dropped < N * C, "%d of %d dropped: is dropout on?", dropped, N * C);
    }
    tr_tensor_free(x);
    tr_tensor_free(full);
    tr_tensor_free(p);
    tr_tensor_free(d);
    tr_tensor_free(want);
}

static void test_bad_table_is_user_error_and_writes_nothing(void)
{
    tr_tensor *x = filled(N, TR_F32, 1.0f), *out = filled(R, TR_F32, 5.0f), *keep = filled(R, TR_F32, 5.0f);
    const int64_t overlap[6] = {0, 2, 3, 2, 2, 4}; /* second run starts inside the first */
    const int64_t past_end[3] = {0, 7, 6};         /* padded rows 6..12 of 12 */
    const int64_t *bad[2] = {overlap, past_end};
    const int64_t nbad[2] = {2, 1};
    for (int i = 0; i < 2; i++) {
        int rc = tr_op_scatter_segments(ctx, out, x, bad[i], nbad[i]);
        CHECK(rc == TR_EUSER, "table %d: rc %d", i, rc);
        CHECK(strstr(tr_ctx_errmsg(ctx), "scatter_segments: segment") != NULL, "%s", tr_ctx_errmsg(ctx));
        CHECK(memcmp(out->data, keep->data, (size_t)(R * C) * 4) == 0, "table %d: a refused scatter wrote", i);
    }
    tr_rng_key key = {.seed = 1};
    CHECK(tr_op_dropout_segments(ctx, x, x, 0.5f, &key, NULL, 1) == TR_EUSER, "a NULL table with segments");
    tr_tensor *odd = filled(3, TR_F32, 0.0f); /* 3 rows of C = 5 is not [N = 7, C] */
    CHECK(tr_op_gather_segments(ctx, x, odd, SEGS, 2) == TR_EUSER, "segments past a short padded tensor");
    tr_tensor_free(odd);
    tr_tensor_free(x);
    tr_tensor_free(out);
    tr_tensor_free(keep);
}

int main(void)
{
    static const check_case cases[] = {
        CASE(test_gather_scatter_round_trip), CASE(test_large_runs_threaded),
        CASE(test_packed_dropout_is_the_padded_mask), CASE(test_bad_table_is_user_error_and_writes_nothing)
    };
    return check_with_ctx(&ctx, cases, sizeof cases / sizeof cases[0]);
}
