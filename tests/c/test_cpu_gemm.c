/* test_cpu_gemm.c — the CPU GEMM router (core/cpu_device/cpu_gemm.h): Linear on oneDNN with packed
 * weights against the same Linear on OpenBLAS, in two contexts of one process
 * (TRAINER_CPU_GEMM chooses each one's library when it first runs a product). A stale pack
 * (a weight changed, its packed copy not) would give the previous step's results, far
 * outside the 1e-5 these compare at. Also: the packs' bytes in the ledger (tag workspace),
 * a frozen weight packed once, half weights, native bf16 products, repeatable bits, and the
 * variable's errors.
 * Without oneDNN (build or machine) the oneDNN cases say SKIP. */
#include "check.h"
#include "op_check.h"
#include "blas_core.h"
#include "cpu_gemm.h"
#include "gemm_onednn.h"
#include "ops_optim.h"
#include "ops_nn.h"
#include "op_query.h"
#include "tensor_version.h"

#include <stdlib.h>
#include <string.h>

enum { O = 96, I = 128, ROWS = 64 };

/* A context whose CPU products run on `lib` ("onednn", "openblas"); NULL when that
 * library cannot be had here. */
static tr_ctx *ctx_on(const char *lib)
{
    tr_ctx *ctx = tr_ctx_new();
    if (!ctx) return NULL;
    setenv("TRAINER_CPU_GEMM", lib, 1);
    const char *got = tr_cpu_gemm_library(ctx);
    unsetenv("TRAINER_CPU_GEMM");
    if (!got || strcmp(got, lib) != 0) {
        tr_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

static tr_tensor *filled(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int tag, uint64_t seed, double scale)
{
    tr_tensor *t = tr_tensor_new(ctx, ndim, shape, TR_F32, TR_CPU, tag);
    int64_t n = t ? t->numel : 0;
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    oc_seed(seed);
    oc_fill(h, n, scale);
    if (t) oc_to_f32(t->data, h, n);
    free(h);
    if (t && dtype != TR_F32) {
        tr_tensor *c = tr_tensor_new(ctx, ndim, shape, dtype, TR_CPU, tag);
        if (c) tr_tensor_copy(ctx, c, t);
        tr_tensor_free(t);
        t = c;
    }
    return t;
}

/* Relative error of a against b (f32 tensors of one numel), as a norm. */
static double rel(const tr_tensor *a, const tr_tensor *b)
{
    double num = 0, den = 0;
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < a->numel; i++) {
        double d = (double)x[i] - y[i];
        num += d * d;
        den += (double)y[i] * y[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static uint64_t workspace_bytes(tr_ctx *ctx)
{
    tr_alloc_stats s;
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &s);
    return s.tag_allocated[TR_TAG_WORKSPACE];
}

/* One model, its data and state in one context: Linear(I -> O), loss 0.5 |Y|^2. */
typedef struct run {
    tr_ctx *ctx;
    tr_tensor *w, *b, *x, *y, *dx, *dw, *db, *mw, *vw, *mb, *vb;
} run;

static int run_new(run *r, tr_ctx *ctx)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    int64_t ws[2] = { O, I }, bs[1] = { O }, xs[2] = { ROWS, I }, ys[2] = { ROWS, O };
    r->w = filled(ctx, 2, ws, TR_F32, TR_TAG_WEIGHTS, 1, 0.2);
    r->b = filled(ctx, 1, bs, TR_F32, TR_TAG_WEIGHTS, 2, 0.1);
    r->x = filled(ctx, 2, xs, TR_F32, TR_TAG_ACTIVATIONS, 3, 1.0);
    r->y = tr_tensor_new(ctx, 2, ys, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    r->dx = tr_tensor_new(ctx, 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    r->dw = tr_tensor_zeros(ctx, 2, ws, TR_F32, TR_CPU, TR_TAG_GRADS);
    r->db = tr_tensor_zeros(ctx, 1, bs, TR_F32, TR_CPU, TR_TAG_GRADS);
    r->mw = tr_tensor_zeros(ctx, 2, ws, TR_F32, TR_CPU, TR_TAG_OPTIMIZER);
    r->vw = tr_tensor_zeros(ctx, 2, ws, TR_F32, TR_CPU, TR_TAG_OPTIMIZER);
    r->mb = tr_tensor_zeros(ctx, 1, bs, TR_F32, TR_CPU, TR_TAG_OPTIMIZER);
    r->vb = tr_tensor_zeros(ctx, 1, bs, TR_F32, TR_CPU, TR_TAG_OPTIMIZER);
    return r->w && r->b && r->x && r->y && r->dx && r->dw && r->db && r->mw && r->vw && r->mb && r->vb;
}

static void run_free(run *r)
{
    tr_tensor *all[] = { r->w, r->b, r->x, r->y, r->dx, r->dw, r->db, r->mw, r->vw, r->mb, r->vb };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tr_tensor_free(all[i]);
}

/* forward, backward (dY = Y), one AdamW step; TR_OK or the first failure */
static int run_step(run *r, int64_t step)
{
    tr_ctx *c = r->ctx;
    int rc = tr_op_linear(c, r->y, r->x, r->w, r->b);
    if (rc == TR_OK) rc = tr_tensor_fill(c, r->dw, 0) || tr_tensor_fill(c, r->db, 0);
    if (rc == TR_OK) rc = tr_op_linear_backward(c, r->dx, r->dw, r->db, r->y, r->x, r->w);
    if (rc == TR_OK) rc = tr_op_adamw(c, r->w, r->dw, r->mw, r->vw, NULL, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, step, 1);
    if (rc == TR_OK) rc = tr_op_adamw(c, r->b, r->db, r->mb, r->vb, NULL, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, step, 1);
    return rc;
}

/* ------------------------------------------------------------ cases */

static tr_ctx *dnnl_ctx, *blas_ctx;

/* Three optimizer steps on each library: every step's output and gradients agree to 1e-5,
 * while consecutive steps' outputs differ by far more (a stale pack would be caught). */
static void test_steps_repack_after_each_update(void)
{
    run a, b;
    CHECK(run_new(&a, dnnl_ctx) && run_new(&b, blas_ctx), "setup: %s", tr_ctx_errmsg(dnnl_ctx));
    int64_t ys[2] = { ROWS, O };
    tr_tensor *prev = tr_tensor_new(blas_ctx, 2, ys, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    for (int64_t step = 1; step <= 3 && !check_case_failed; step++) {
        uint64_t v0 = tr_tensor_version(a.w);
        int ra = run_step(&a, step), rb = run_step(&b, step);
        CHECK(ra == TR_OK, "onednn step %lld: %s", (long long)step, tr_ctx_errmsg(dnnl_ctx));
        CHECK(rb == TR_OK, "openblas step %lld: %s", (long long)step, tr_ctx_errmsg(blas_ctx));
        CHECK(tr_tensor_version(a.w) > v0, "the optimizer step did not move the weight's version");
        CHECK(rel(a.y, b.y) < 1e-5, "step %lld: forward differs by %g", (long long)step, rel(a.y, b.y));
        CHECK(rel(a.dx, b.dx) < 1e-5, "step %lld: dx differs by %g", (long long)step, rel(a.dx, b.dx));
        CHECK(rel(a.dw, b.dw) < 1e-5, "step %lld: dw differs by %g", (long long)step, rel(a.dw, b.dw));
        CHECK(rel(a.w, b.w) < 1e-5, "step %lld: updated weights differ by %g", (long long)step, rel(a.w, b.w));
        if (step > 1) CHECK(rel(b.y, prev) > 1e-3, "steps %lld and %lld gave near-equal outputs: the test sees no update",
                            (long long)step - 1, (long long)step);
        tr_tensor_copy(blas_ctx, prev, b.y);
    }
    tr_tensor_free(prev);
    run_free(&a);
    run_free(&b);
}

/* A load (write), a LoRA merge (copy) and a fill of the weight each re-pack it. */
static void test_writes_of_the_weight_repack(void)
{
    run a, b;
    CHECK(run_new(&a, dnnl_ctx) && run_new(&b, blas_ctx), "setup");
    int64_t ws[2] = { O, I };
    tr_tensor *src = filled(blas_ctx, 2, ws, TR_F32, TR_TAG_WEIGHTS, 9, 0.3);
    for (int how = 0; how < 3 && !check_case_failed; how++) {
        CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));   /* packs */
        int rc = TR_OK;
        if (how == 0) {
            rc = tr_tensor_write(dnnl_ctx, a.w, src->data, tr_tensor_nbytes(src));
            rc |= tr_tensor_write(blas_ctx, b.w, src->data, tr_tensor_nbytes(src));
        } else if (how == 1) {
            ((float *)src->data)[5] += 1.0f;
            rc = tr_tensor_copy(dnnl_ctx, a.w, src) | tr_tensor_copy(blas_ctx, b.w, src);
        } else {
            rc = tr_tensor_fill(dnnl_ctx, a.w, 0.25) | tr_tensor_fill(blas_ctx, b.w, 0.25);
        }
        CHECK(rc == TR_OK, "write %d failed", how);
        CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
        CHECK(tr_op_linear(blas_ctx, b.y, b.x, b.w, b.b) == TR_OK, "%s", tr_ctx_errmsg(blas_ctx));
        CHECK(rel(a.y, b.y) < 1e-5, "after write %d the forward differs by %g (stale pack?)", how, rel(a.y, b.y));
        CHECK(tr_op_linear_backward(dnnl_ctx, a.dx, NULL, NULL, a.y, NULL, a.w) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
        CHECK(tr_op_linear_backward(blas_ctx, b.dx, NULL, NULL, b.y, NULL, b.w) == TR_OK, "%s", tr_ctx_errmsg(blas_ctx));
        CHECK(rel(a.dx, b.dx) < 1e-5, "after write %d dx differs by %g", how, rel(a.dx, b.dx));
    }
    tr_tensor_free(src);
    run_free(&a);
    run_free(&b);
}

/* What oneDNN's pack of a K x N operand takes in the CPU allocator (512-byte rounding); 0
 * where its layout is the operand as stored (the input gradient's on AVX2), which the
 * product takes as it is. */
static uint64_t pack_bytes(int N, int K, int transB)
{
    tr_onednn *d = NULL;
    tr_error err;
    size_t bytes = 0;
    int plain = 0;
    CHECK(tr_onednn_open(&d, &err) == TR_OK, "oneDNN: %s", err.msg);
    CHECK(tr_onednn_pack_bytes(d, N, K, transB, &bytes, &err) == TR_OK, "pack bytes: %s", err.msg);
    CHECK(tr_onednn_pack_plain(d, N, K, transB, &plain, &err) == TR_OK, "pack plain: %s", err.msg);
    tr_onednn_close(d);
    return plain == 1 ? 0 : (bytes + 511) / 512 * 512;
}

/* On AVX2 oneDNN's packed layout is the plain one: the input gradient's (B = W) is the
 * weight as stored, the forward's (B = W^T) the weight transposed; blocked elsewhere. */
static void test_pack_layouts_plain_or_blocked(void)
{
    tr_onednn *d = NULL;
    tr_error err;
    int fwd = -1, bwd = -1;
    CHECK(tr_onednn_open(&d, &err) == TR_OK, "oneDNN: %s", err.msg);
    CHECK(tr_onednn_pack_plain(d, O, I, 1, &fwd, &err) == TR_OK, "pack plain: %s", err.msg);
    CHECK(tr_onednn_pack_plain(d, I, O, 0, &bwd, &err) == TR_OK, "pack plain: %s", err.msg);
    tr_onednn_close(d);
    CHECK(fwd == 0 || fwd == 2, "forward layout %d: a transposed weight's pack is blocked (0) or W^T plain (2)", fwd);
    CHECK(bwd == 0 || bwd == 1, "input gradient layout %d: blocked (0) or W itself (1)", bwd);
    CHECK((fwd == 0) == (bwd == 0), "forward %d, input gradient %d: blocked for one and not the other", fwd, bwd);
}

/* The two packs are workspace while the weight lives, and go with it; a frozen weight is
 * packed once: more forwards allocate nothing, nor do its products taken in turn. Once W is
 * written, repacking one product frees the other's stale pack: a trained weight's forward
 * ends holding its forward pack alone. */
static void test_packs_are_workspace_and_made_once(void)
{
    uint64_t before = workspace_bytes(dnnl_ctx);
    run a;
    CHECK(run_new(&a, dnnl_ctx), "setup");
    /* The packs' sizes as oneDNN's blocking on this CPU makes them (it pads N and K by the ISA:
     * to 64 and 16 with AVX-512, other sizes with AVX2), each a block of the allocator (512-byte
     * rounding): forward B = W^T (N = O, K = I, transposed), input gradient B = W (N = I, K = O). */
    uint64_t fwd = pack_bytes(O, I, 1), bwd = pack_bytes(I, O, 0);
    CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(workspace_bytes(dnnl_ctx) == before + fwd, "workspace %llu after the forward, want %llu",
          (unsigned long long)workspace_bytes(dnnl_ctx), (unsigned long long)(before + fwd));
    tr_alloc_stats s0, s1;
    tr_alloc_get_stats(tr_ctx_alloc(dnnl_ctx, TR_CPU), &s0);
    for (int i = 0; i < 3; i++) CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "forward %d", i);
    tr_alloc_get_stats(tr_ctx_alloc(dnnl_ctx, TR_CPU), &s1);
    CHECK(s1.n_alloc == s0.n_alloc, "%llu allocations in three forwards of a frozen weight (re-packed?)",
          (unsigned long long)(s1.n_alloc - s0.n_alloc));
    CHECK(tr_op_linear_backward(dnnl_ctx, a.dx, NULL, NULL, a.y, NULL, a.w) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(workspace_bytes(dnnl_ctx) == before + fwd + bwd, "workspace %llu with both packs, want %llu",
          (unsigned long long)workspace_bytes(dnnl_ctx), (unsigned long long)(before + fwd + bwd));
    tr_alloc_get_stats(tr_ctx_alloc(dnnl_ctx, TR_CPU), &s0);
    for (int i = 0; i < 2; i++) {
        CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "forward %d", i);
        CHECK(tr_op_linear_backward(dnnl_ctx, a.dx, NULL, NULL, a.y, NULL, a.w) == TR_OK, "backward %d", i);
    }
    tr_alloc_get_stats(tr_ctx_alloc(dnnl_ctx, TR_CPU), &s1);
    CHECK(s1.n_alloc == s0.n_alloc, "%llu allocations taking an unwritten weight's products in turn",
          (unsigned long long)(s1.n_alloc - s0.n_alloc));
    CHECK(tr_tensor_fill(dnnl_ctx, a.w, 0.125) == TR_OK, "fill");
    CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(workspace_bytes(dnnl_ctx) == before + fwd, "workspace %llu after a write and a forward, want %llu "
          "(the stale input-gradient pack kept?)", (unsigned long long)workspace_bytes(dnnl_ctx),
          (unsigned long long)(before + fwd));
    CHECK(tr_tensor_fill(dnnl_ctx, a.w, 0.25) == TR_OK, "fill");
    CHECK(tr_op_linear_backward(dnnl_ctx, a.dx, NULL, NULL, a.y, NULL, a.w) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(workspace_bytes(dnnl_ctx) == before + bwd, "workspace %llu after a write and a backward, want %llu "
          "(the stale forward pack kept?)", (unsigned long long)workspace_bytes(dnnl_ctx),
          (unsigned long long)(before + bwd));
    run_free(&a);
    CHECK(workspace_bytes(dnnl_ctx) == before, "workspace %llu after the weight was freed, want %llu",
          (unsigned long long)workspace_bytes(dnnl_ctx), (unsigned long long)before);
    /* OpenBLAS keeps no packs */
    uint64_t b0 = workspace_bytes(blas_ctx);
    run b;
    CHECK(run_new(&b, blas_ctx) && tr_op_linear(blas_ctx, b.y, b.x, b.w, b.b) == TR_OK, "openblas forward");
    CHECK(workspace_bytes(blas_ctx) == b0, "OpenBLAS left %llu workspace bytes",
          (unsigned long long)(workspace_bytes(blas_ctx) - b0));
    run_free(&b);
}

/* A weight marked transient (tr_cpu_weight_transient_packs) has each pack made for one product
 * and freed as it returns: marking frees what it holds, a forward or backward leaves no
 * workspace behind, the results are the kept packs' bits, and unmarking keeps packs again. */
static void test_transient_packs(void)
{
    uint64_t before = workspace_bytes(dnnl_ctx);
    run a, b;
    CHECK(run_new(&a, dnnl_ctx) && run_new(&b, dnnl_ctx), "setup");
    CHECK(tr_tensor_copy(dnnl_ctx, b.w, a.w) == TR_OK && tr_tensor_copy(dnnl_ctx, b.x, a.x) == TR_OK, "copy");
    uint64_t fwd = pack_bytes(O, I, 1), bwd = pack_bytes(I, O, 0);
    CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    uint64_t kept = workspace_bytes(dnnl_ctx);
    CHECK(kept == before + fwd, "workspace %llu after a kept forward, want %llu", (unsigned long long)kept,
          (unsigned long long)(before + fwd));
    CHECK(tr_cpu_weight_transient_packs(dnnl_ctx, a.w, 1) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(workspace_bytes(dnnl_ctx) == before, "marking left %llu workspace bytes (the kept pack not freed?)",
          (unsigned long long)(workspace_bytes(dnnl_ctx) - before));
    tr_alloc_stats s0, s1;
    tr_alloc_get_stats(tr_ctx_alloc(dnnl_ctx, TR_CPU), &s0);
    for (int i = 0; i < 2; i++) {
        CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "forward %d", i);
        CHECK(workspace_bytes(dnnl_ctx) == before, "forward %d left %llu workspace bytes", i,
              (unsigned long long)(workspace_bytes(dnnl_ctx) - before));
        CHECK(tr_op_linear_backward(dnnl_ctx, a.dx, NULL, NULL, a.y, NULL, a.w) == TR_OK, "backward %d", i);
        CHECK(workspace_bytes(dnnl_ctx) == before, "backward %d left %llu workspace bytes", i,
              (unsigned long long)(workspace_bytes(dnnl_ctx) - before));
    }
    tr_alloc_get_stats(tr_ctx_alloc(dnnl_ctx, TR_CPU), &s1);
    CHECK(s1.n_alloc - s0.n_alloc == (fwd ? 2u : 0u) + (bwd ? 2u : 0u),
          "%llu allocations in two transient forwards and backwards, want one per packed product",
          (unsigned long long)(s1.n_alloc - s0.n_alloc));
    /* the same products on the kept packs of an equal weight: the same bits */
    CHECK(tr_op_linear(dnnl_ctx, b.y, b.x, b.w, a.b) == TR_OK &&
              tr_op_linear_backward(dnnl_ctx, b.dx, NULL, NULL, a.y, NULL, b.w) == TR_OK,
          "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(rel(a.y, b.y) == 0 && rel(a.dx, b.dx) == 0, "transient packs give %g / %g from kept ones", rel(a.y, b.y),
          rel(a.dx, b.dx));
    uint64_t with_b = workspace_bytes(dnnl_ctx);
    CHECK(tr_cpu_weight_transient_packs(dnnl_ctx, a.w, 0) == TR_OK, "unmark");
    CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(workspace_bytes(dnnl_ctx) == with_b + fwd, "workspace %llu after unmarking and a forward, want %llu",
          (unsigned long long)workspace_bytes(dnnl_ctx), (unsigned long long)(with_b + fwd));
    /* any other tensor is left alone */
    CHECK(tr_cpu_weight_transient_packs(dnnl_ctx, a.b, 1) == TR_OK, "a 1-D tensor");
    run_free(&a);
    run_free(&b);
    CHECK(workspace_bytes(dnnl_ctx) == before, "workspace %llu after the weights were freed, want %llu",
          (unsigned long long)workspace_bytes(dnnl_ctx), (unsigned long long)before);
}

/* tr_cpu_linear_pack_bytes (gemm_query.h, what `trainer plan` counts) says the packs a Linear
 * makes: the workspace one forward and one input gradient leave, product by product; none on
 * OpenBLAS or for a side under 32; a weight of no rows is a user error. */
static void test_pack_bytes_query(void)
{
    int64_t q[2] = { -1, -1 };
    CHECK(tr_cpu_linear_pack_bytes(dnnl_ctx, O, I, q) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    uint64_t before = workspace_bytes(dnnl_ctx);
    run a;
    CHECK(run_new(&a, dnnl_ctx), "setup");
    CHECK(tr_op_linear(dnnl_ctx, a.y, a.x, a.w, a.b) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    uint64_t fwd = workspace_bytes(dnnl_ctx) - before;
    CHECK(tr_op_linear_backward(dnnl_ctx, a.dx, NULL, NULL, a.y, NULL, a.w) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    uint64_t bwd = workspace_bytes(dnnl_ctx) - before - fwd;
    run_free(&a);
    CHECK((uint64_t)(q[0] + 511) / 512 * 512 == fwd, "forward: the query says %lld bytes, the pack took %llu",
          (long long)q[0], (unsigned long long)fwd);
    CHECK((uint64_t)(q[1] + 511) / 512 * 512 == bwd, "input gradient: the query says %lld bytes, the pack took %llu",
          (long long)q[1], (unsigned long long)bwd);
    CHECK(q[0] > 0, "the forward's pack: %lld bytes (blocked or transposed, never the weight itself)", (long long)q[0]);
    CHECK(tr_cpu_linear_pack_bytes(dnnl_ctx, 8, 384, q) == TR_OK && q[0] == 0 && q[1] == 0,
          "[8, 384]: %lld + %lld bytes packed (a side under 32 stays on OpenBLAS)", (long long)q[0], (long long)q[1]);
    CHECK(tr_cpu_linear_pack_bytes(blas_ctx, O, I, q) == TR_OK && q[0] == 0 && q[1] == 0,
          "OpenBLAS: %lld + %lld bytes packed", (long long)q[0], (long long)q[1]);
    CHECK(tr_cpu_linear_pack_bytes(dnnl_ctx, 0, I, q) == TR_EUSER, "a weight of no rows");
    CHECK(strstr(tr_ctx_errmsg(dnnl_ctx), "[0, 128]") != NULL, "%s", tr_ctx_errmsg(dnnl_ctx));
    tr_error_clear(tr_ctx_err(dnnl_ctx));
}

/* A bf16 weight is not packed (core/cpu_device/cpu_gemm.c): the same products as OpenBLAS's, and
 * no workspace kept after them. */
static void test_half_weight(void)
{
    uint64_t before = workspace_bytes(dnnl_ctx);
    int64_t ws[2] = { O, I }, xs[2] = { ROWS, I }, ys[2] = { ROWS, O };
    tr_tensor *wa = filled(dnnl_ctx, 2, ws, TR_BF16, TR_TAG_WEIGHTS, 4, 0.2);
    tr_tensor *wb = filled(blas_ctx, 2, ws, TR_BF16, TR_TAG_WEIGHTS, 4, 0.2);
    tr_tensor *xa = filled(dnnl_ctx, 2, xs, TR_F32, TR_TAG_ACTIVATIONS, 5, 1.0);
    tr_tensor *xb = filled(blas_ctx, 2, xs, TR_F32, TR_TAG_ACTIVATIONS, 5, 1.0);
    tr_tensor *ya = tr_tensor_new(dnnl_ctx, 2, ys, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    tr_tensor *yb = tr_tensor_new(blas_ctx, 2, ys, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    tr_tensor *da = tr_tensor_new(dnnl_ctx, 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    tr_tensor *db = tr_tensor_new(blas_ctx, 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    CHECK(wa && wb && xa && xb && ya && yb && da && db, "setup");
    CHECK(tr_op_linear(dnnl_ctx, ya, xa, wa, NULL) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(tr_op_linear(blas_ctx, yb, xb, wb, NULL) == TR_OK, "%s", tr_ctx_errmsg(blas_ctx));
    CHECK(rel(ya, yb) < 1e-5, "bf16 weight: forward differs by %g", rel(ya, yb));
    CHECK(tr_op_linear_backward(dnnl_ctx, da, NULL, NULL, ya, NULL, wa) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    CHECK(tr_op_linear_backward(blas_ctx, db, NULL, NULL, yb, NULL, wb) == TR_OK, "%s", tr_ctx_errmsg(blas_ctx));
    CHECK(rel(da, db) < 1e-5, "bf16 weight: dx differs by %g", rel(da, db));
    CHECK(workspace_bytes(dnnl_ctx) == before, "a bf16 weight left %llu workspace bytes (packed?)",
          (unsigned long long)(workspace_bytes(dnnl_ctx) - before));
    tr_tensor *all[] = { wa, wb, xa, xb, ya, yb, da, db };
    for (size_t i = 0; i < 8; i++) tr_tensor_free(all[i]);
}

/* The same products twice give the same bits, the weight gradient's long reduction too. */
static void test_repeatable_bits(void)
{
    enum { R = 1024 };
    int64_t ws[2] = { O, I }, xs[2] = { R, I }, ys[2] = { R, O };
    tr_tensor *w = filled(dnnl_ctx, 2, ws, TR_F32, TR_TAG_WEIGHTS, 6, 0.2);
    tr_tensor *x = filled(dnnl_ctx, 2, xs, TR_F32, TR_TAG_ACTIVATIONS, 7, 1.0);
    tr_tensor *d = filled(dnnl_ctx, 2, ys, TR_F32, TR_TAG_ACTIVATIONS, 8, 1.0);
    tr_tensor *y[2], *dx[2], *dw[2];
    for (int k = 0; k < 2; k++) {
        y[k] = tr_tensor_new(dnnl_ctx, 2, ys, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
        dx[k] = tr_tensor_new(dnnl_ctx, 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
        dw[k] = tr_tensor_zeros(dnnl_ctx, 2, ws, TR_F32, TR_CPU, TR_TAG_GRADS);
        CHECK(tr_op_linear(dnnl_ctx, y[k], x, w, NULL) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
        CHECK(tr_op_linear_backward(dnnl_ctx, dx[k], dw[k], NULL, d, x, w) == TR_OK, "%s", tr_ctx_errmsg(dnnl_ctx));
    }
    CHECK(memcmp(y[0]->data, y[1]->data, tr_tensor_nbytes(y[0])) == 0, "forward bits differ between two runs");
    CHECK(memcmp(dx[0]->data, dx[1]->data, tr_tensor_nbytes(dx[0])) == 0, "dx bits differ between two runs");
    CHECK(memcmp(dw[0]->data, dw[1]->data, tr_tensor_nbytes(dw[0])) == 0, "dw bits differ between two runs");
    for (int k = 0; k < 2; k++) tr_tensor_free(y[k]), tr_tensor_free(dx[k]), tr_tensor_free(dw[k]);
    tr_tensor_free(w), tr_tensor_free(x), tr_tensor_free(d);
}

/* The general matmul on oneDNN (transposes, alpha as an output scale, beta as a sum, a
 * batch of matrices or a batch sharing b) gives OpenBLAS's results. */
static void test_matmul_matches_openblas(void)
{
    enum { NB = 3, M = 40, K = 64, N = 48 };
    for (int v = 0; v < 8 && !check_case_failed; v++) {
        int ta = v & 1, tb = (v >> 1) & 1, batched_b = (v >> 2) & 1;
        float alpha = ta ? 0.75f : 1.0f, beta = tb ? 0.5f : 0.0f;
        int64_t as[3] = { NB, ta ? K : M, ta ? M : K }, bs[3] = { NB, tb ? N : K, tb ? K : N }, cs[3] = { NB, M, N };
        int64_t ns[1] = { N };
        tr_tensor *t[2][4];
        tr_ctx *c[2] = { dnnl_ctx, blas_ctx };
        for (int k = 0; k < 2; k++) {
            t[k][0] = filled(c[k], 3, cs, TR_F32, TR_TAG_ACTIVATIONS, 20 + (uint64_t)v, 1.0);
            t[k][1] = filled(c[k], 3, as, TR_F32, TR_TAG_ACTIVATIONS, 30 + (uint64_t)v, 1.0);
            t[k][2] = batched_b ? filled(c[k], 3, bs, TR_F32, TR_TAG_ACTIVATIONS, 40 + (uint64_t)v, 1.0)
                                : filled(c[k], 2, bs + 1, TR_F32, TR_TAG_ACTIVATIONS, 40 + (uint64_t)v, 1.0);
            t[k][3] = alpha == 1.0f ? filled(c[k], 1, ns, TR_F32, TR_TAG_WEIGHTS, 50, 1.0) : NULL;
            CHECK(tr_op_matmul(c[k], t[k][0], t[k][1], t[k][2], t[k][3], ta, tb, alpha, beta) == TR_OK,
                  "variant %d: %s", v, tr_ctx_errmsg(c[k]));
        }
        CHECK(rel(t[0][0], t[1][0]) < 1e-5, "variant %d (ta %d tb %d batched b %d): differs by %g", v, ta, tb,
              batched_b, rel(t[0][0], t[1][0]));
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 4; i++) tr_tensor_free(t[k][i]);
    }
}

/* LoRA's rank-8 factor products (one side 8, 4096 rows) route to oneDNN, a classifier
 * head's 2 labels and a small product stay on OpenBLAS; each factor product, with its alpha
 * and beta, agrees with OpenBLAS's. */
static void test_skinny_products_route_to_onednn(void)
{
    CHECK(tr_cpu_gemm_routes_onednn(dnnl_ctx, 4096, 8, 384), "X A^T (4096 x 8 x 384) stays on OpenBLAS");
    CHECK(tr_cpu_gemm_routes_onednn(dnnl_ctx, 384, 8, 4096), "dy^T a (384 x 8 x 4096) stays on OpenBLAS");
    CHECK(tr_cpu_gemm_routes_onednn(dnnl_ctx, 8, 384, 4096), "da^T X (8 x 384 x 4096) stays on OpenBLAS");
    CHECK(!tr_cpu_gemm_routes_onednn(dnnl_ctx, 4096, 2, 384), "a 2-label head went to oneDNN");
    CHECK(!tr_cpu_gemm_routes_onednn(dnnl_ctx, 64, 8, 64), "a small skinny product went to oneDNN");
    CHECK(!tr_cpu_gemm_routes_onednn(blas_ctx, 4096, 8, 384), "TRAINER_CPU_GEMM=openblas routed to oneDNN");
    /* a wide plain product (BERT-base's FFN weight gradient) stays on OpenBLAS only where
     * OpenBLAS runs the CPU's widest kernels (OPENBLAS_CORETYPE may hold it below) */
    int blas_full = tr_blas_core_rank(tr_blas_core_name()) >= tr_blas_cpu_rank();
    CHECK(tr_cpu_gemm_routes_onednn(dnnl_ctx, 768, 3072, 4096) == !blas_full,
          "768 x 3072 x 4096 routed to %s with OpenBLAS on %s (CPU rank %d)",
          tr_cpu_gemm_routes_onednn(dnnl_ctx, 768, 3072, 4096) ? "oneDNN" : "OpenBLAS", tr_blas_core_name(),
          tr_blas_cpu_rank());
    /* { M, N, K, transA, transB, alpha, beta } of a LoRA layer 384 -> 384, r 8, 4096 rows */
    static const struct { int M, N, K, ta, tb; float alpha, beta; } p[] = {
        { 4096, 8, 384, 0, 1, 1.0f, 0.0f },  { 4096, 384, 8, 0, 1, 2.0f, 1.0f }, { 384, 8, 4096, 1, 0, 2.0f, 1.0f },
        { 4096, 8, 384, 0, 0, 2.0f, 0.0f },  { 8, 384, 4096, 1, 0, 1.0f, 1.0f }, { 4096, 384, 8, 0, 0, 1.0f, 1.0f },
    };
    for (size_t v = 0; v < sizeof p / sizeof p[0] && !check_case_failed; v++) {
        CHECK(tr_cpu_gemm_routes_onednn(dnnl_ctx, p[v].M, p[v].N, p[v].K), "product %zu stays on OpenBLAS", v);
        int64_t as[2] = { p[v].ta ? p[v].K : p[v].M, p[v].ta ? p[v].M : p[v].K };
        int64_t bs[2] = { p[v].tb ? p[v].N : p[v].K, p[v].tb ? p[v].K : p[v].N }, cs[2] = { p[v].M, p[v].N };
        tr_tensor *t[2][3];
        tr_ctx *c[2] = { dnnl_ctx, blas_ctx };
        for (int k = 0; k < 2; k++) {
            t[k][0] = filled(c[k], 2, cs, TR_F32, TR_TAG_ACTIVATIONS, 60 + (uint64_t)v, 1.0);
            t[k][1] = filled(c[k], 2, as, TR_F32, TR_TAG_ACTIVATIONS, 70 + (uint64_t)v, 1.0);
            t[k][2] = filled(c[k], 2, bs, TR_F32, TR_TAG_WEIGHTS, 80 + (uint64_t)v, 0.1);
            CHECK(tr_op_matmul(c[k], t[k][0], t[k][1], t[k][2], NULL, p[v].ta, p[v].tb, p[v].alpha, p[v].beta) == TR_OK,
                  "product %zu: %s", v, tr_ctx_errmsg(c[k]));
        }
        CHECK(rel(t[0][0], t[1][0]) < 1e-5, "product %zu (%d x %d x %d): differs by %g", v, p[v].M, p[v].N, p[v].K,
              rel(t[0][0], t[1][0]));
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 3; i++) tr_tensor_free(t[k][i]);
    }
}

/* bf16 activations go through the GEMM in blocks of rows (at most TR_STAGE_BLOCK elements
 * each, made equal): 2049 rows of 512 are two blocks of 1025 and 1024 rows. Forward and
 * input gradient agree with OpenBLAS's to bf16's rounding, every row written. */
static void test_half_activations_in_blocks(void)
{
    enum { R = 2049, C = 512 };
    int64_t ws[2] = { C, C }, xs[2] = { R, C };
    tr_ctx *c[2] = { dnnl_ctx, blas_ctx };
    tr_tensor *w[2], *x[2], *y[2], *dx[2], *y32[2], *dx32[2];
    for (int k = 0; k < 2; k++) {
        w[k] = filled(c[k], 2, ws, TR_F32, TR_TAG_WEIGHTS, 11, 0.05);
        x[k] = filled(c[k], 2, xs, TR_BF16, TR_TAG_ACTIVATIONS, 12, 1.0);
        y[k] = tr_tensor_new(c[k], 2, xs, TR_BF16, TR_CPU, TR_TAG_ACTIVATIONS);
        dx[k] = tr_tensor_new(c[k], 2, xs, TR_BF16, TR_CPU, TR_TAG_ACTIVATIONS);
        y32[k] = tr_tensor_new(c[k], 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
        dx32[k] = tr_tensor_new(c[k], 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
        CHECK(tr_tensor_fill(c[k], y[k], NAN) == TR_OK && tr_tensor_fill(c[k], dx[k], NAN) == TR_OK, "poison");
        CHECK(tr_op_linear(c[k], y[k], x[k], w[k], NULL) == TR_OK, "%s", tr_ctx_errmsg(c[k]));
        CHECK(tr_op_linear_backward(c[k], dx[k], NULL, NULL, y[k], NULL, w[k]) == TR_OK, "%s", tr_ctx_errmsg(c[k]));
        CHECK(tr_tensor_copy(c[k], y32[k], y[k]) == TR_OK && tr_tensor_copy(c[k], dx32[k], dx[k]) == TR_OK, "copy");
    }
    int finite = 1;
    for (int64_t i = 0; i < y32[0]->numel; i++)
        finite &= isfinite(((float *)y32[0]->data)[i]) && isfinite(((float *)dx32[0]->data)[i]);
    CHECK(finite, "a row of the output was not written");
    CHECK(rel(y32[0], y32[1]) < 1e-2, "bf16 forward differs by %g", rel(y32[0], y32[1]));
    CHECK(rel(dx32[0], dx32[1]) < 1e-2, "bf16 dx differs by %g", rel(dx32[0], dx32[1]));
    for (int k = 0; k < 2; k++) {
        tr_tensor *all[] = { w[k], x[k], y[k], dx[k], y32[k], dx32[k] };
        for (int i = 0; i < 6; i++) tr_tensor_free(all[i]);
    }
}

/* bf16 x, w and dout where bf16 kernels beat f32 (AMX; AVX512-BF16 on AMD): the products
 * run natively (oneDNN, no staging), into bf16 or f32 outputs, with a bias, the input
 * gradient, the weight gradient ACCUMULATED into its f32 buffer and the bias gradient; every
 * one agrees with the staged f32 products of TRAINER_CPU_GEMM=openblas to bf16's rounding.
 * A non-square weight (O != I) catches a transposed operand. Elsewhere this checks that
 * nothing claims to be native (an AMD CPU with AVX512-BF16 must) and says SKIP. */
static void test_bf16_products_native(void)
{
    int avx512_bf16 = 0, amx = 0, amd = 0;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    avx512_bf16 = __builtin_cpu_supports("avx512bf16") != 0;
    amx = __builtin_cpu_supports("amx-bf16") != 0;
    amd = __builtin_cpu_is("amd") != 0;
#endif
    CHECK(!tr_cpu_gemm_bf16_native(blas_ctx), "TRAINER_CPU_GEMM=openblas claims native bf16 products");
    int native = tr_cpu_gemm_bf16_native(dnnl_ctx);
    if (amd && avx512_bf16) CHECK(native, "an AMD CPU with AVX512-BF16 whose bf16 products are not native");
    if (!avx512_bf16 && !amx) CHECK(!native, "native bf16 products on a CPU without bf16 instructions");
    if (!amx && !amd) CHECK(!native, "native bf16 products on an Intel CPU without AMX (slower than f32 there)");
    if (!native) {
        printf("SKIP test_bf16_products_native: bf16 products are staged to f32 on this CPU (%s%s%s)\n",
               amd ? "AMD" : "not AMD", avx512_bf16 ? ", AVX512-BF16" : "", amx ? ", AMX" : "");
        return;
    }
    enum { R = 2049, IN = 320, OUT = 192 };
    int64_t ws[2] = { OUT, IN }, xs[2] = { R, IN }, ys[2] = { R, OUT }, bs[1] = { OUT };
    tr_ctx *c[2] = { dnnl_ctx, blas_ctx };
    for (int out_f32 = 0; out_f32 < 2 && !check_case_failed; out_f32++) {
        int odt = out_f32 ? TR_F32 : TR_BF16;
        tr_tensor *w[2], *b[2], *x[2], *d[2], *y[2], *dx[2], *dw[2], *db[2], *y32[2], *dx32[2];
        for (int k = 0; k < 2; k++) {
            w[k] = filled(c[k], 2, ws, TR_BF16, TR_TAG_WEIGHTS, 91, 0.05);
            b[k] = filled(c[k], 1, bs, TR_F32, TR_TAG_WEIGHTS, 92, 0.5);
            x[k] = filled(c[k], 2, xs, TR_BF16, TR_TAG_ACTIVATIONS, 93, 1.0);
            d[k] = filled(c[k], 2, ys, TR_BF16, TR_TAG_ACTIVATIONS, 94, 1.0);
            y[k] = tr_tensor_new(c[k], 2, ys, odt, TR_CPU, TR_TAG_ACTIVATIONS);
            dx[k] = tr_tensor_new(c[k], 2, xs, odt, TR_CPU, TR_TAG_ACTIVATIONS);
            dw[k] = filled(c[k], 2, ws, TR_F32, TR_TAG_GRADS, 95, 30.0);   /* accumulated onto */
            db[k] = filled(c[k], 1, bs, TR_F32, TR_TAG_GRADS, 96, 30.0);
            y32[k] = tr_tensor_new(c[k], 2, ys, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
            dx32[k] = tr_tensor_new(c[k], 2, xs, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
            CHECK(tr_tensor_fill(c[k], y[k], NAN) == TR_OK && tr_tensor_fill(c[k], dx[k], NAN) == TR_OK, "poison");
            CHECK(tr_op_linear(c[k], y[k], x[k], w[k], b[k]) == TR_OK, "%s", tr_ctx_errmsg(c[k]));
            CHECK(tr_op_linear_backward(c[k], dx[k], dw[k], db[k], d[k], x[k], w[k]) == TR_OK, "%s",
                  tr_ctx_errmsg(c[k]));
            CHECK(tr_tensor_copy(c[k], y32[k], y[k]) == TR_OK && tr_tensor_copy(c[k], dx32[k], dx[k]) == TR_OK, "copy");
        }
        int finite = 1;
        for (int64_t i = 0; i < y32[0]->numel; i++) finite &= isfinite(((float *)y32[0]->data)[i]);
        for (int64_t i = 0; i < dx32[0]->numel; i++) finite &= isfinite(((float *)dx32[0]->data)[i]);
        CHECK(finite, "out %s: a row of y or dx was not written", out_f32 ? "f32" : "bf16");
        double tol = out_f32 ? 1e-5 : 1e-2;   /* f32 outputs: only the summation order differs */
        CHECK(rel(y32[0], y32[1]) < tol, "out %s: forward differs by %g", out_f32 ? "f32" : "bf16", rel(y32[0], y32[1]));
        CHECK(rel(dx32[0], dx32[1]) < tol, "out %s: dx differs by %g", out_f32 ? "f32" : "bf16", rel(dx32[0], dx32[1]));
        CHECK(rel(dw[0], dw[1]) < 1e-5, "dw differs by %g", rel(dw[0], dw[1]));
        CHECK(rel(db[0], db[1]) < 1e-5, "dbias differs by %g", rel(db[0], db[1]));
        for (int k = 0; k < 2; k++) {
            tr_tensor *all[] = { w[k], b[k], x[k], d[k], y[k], dx[k], dw[k], db[k], y32[k], dx32[k] };
            for (int i = 0; i < 10; i++) tr_tensor_free(all[i]);
        }
    }
}

/* An unknown library is a user error naming the variable and its values. */
static void test_unknown_library_is_a_user_error(void)
{
    tr_ctx *ctx = tr_ctx_new();
    setenv("TRAINER_CPU_GEMM", "mkl", 1);
    CHECK(tr_cpu_gemm_library(ctx) == NULL, "an unknown library was accepted");
    CHECK(tr_ctx_err(ctx)->status == TR_EUSER, "status %d", tr_ctx_err(ctx)->status);
    CHECK(strstr(tr_ctx_errmsg(ctx), "TRAINER_CPU_GEMM=\"mkl\"") && strstr(tr_ctx_errmsg(ctx), "openblas or onednn"),
          "message: %s", tr_ctx_errmsg(ctx));
    unsetenv("TRAINER_CPU_GEMM");
    CHECK(tr_cpu_gemm_library(ctx) != NULL, "unset again, the default library is not had: %s", tr_ctx_errmsg(ctx));
    tr_ctx_free(ctx);
}

int main(void)
{
    RUN(test_unknown_library_is_a_user_error);
    blas_ctx = ctx_on("openblas");
    dnnl_ctx = ctx_on("onednn");
    if (!blas_ctx) {
        printf("FAIL setup: no OpenBLAS context\n");
        return 1;
    }
    if (!dnnl_ctx) {
        const char *why = "no oneDNN in this build or on this machine";
        printf("SKIP test_steps_repack_after_each_update: %s\n", why);
        printf("SKIP test_writes_of_the_weight_repack: %s\n", why);
        printf("SKIP test_packs_are_workspace_and_made_once: %s\n", why);
        printf("SKIP test_pack_layouts_plain_or_blocked: %s\n", why);
        printf("SKIP test_pack_bytes_query: %s\n", why);
        printf("SKIP test_transient_packs: %s\n", why);
        printf("SKIP test_half_weight: %s\n", why);
        printf("SKIP test_repeatable_bits: %s\n", why);
        printf("SKIP test_matmul_matches_openblas: %s\n", why);
        printf("SKIP test_half_activations_in_blocks: %s\n", why);
        printf("SKIP test_skinny_products_route_to_onednn: %s\n", why);
        printf("SKIP test_bf16_products_native: %s\n", why);
    } else {
        RUN(test_steps_repack_after_each_update);
        RUN(test_writes_of_the_weight_repack);
        RUN(test_packs_are_workspace_and_made_once);
        RUN(test_pack_layouts_plain_or_blocked);
        RUN(test_pack_bytes_query);
        RUN(test_transient_packs);
        RUN(test_half_weight);
        RUN(test_repeatable_bits);
        RUN(test_matmul_matches_openblas);
        RUN(test_half_activations_in_blocks);
        RUN(test_skinny_products_route_to_onednn);
        RUN(test_bf16_products_native);
    }
    tr_ctx_free(dnnl_ctx);
    tr_ctx_free(blas_ctx);
    return check_done();
}
