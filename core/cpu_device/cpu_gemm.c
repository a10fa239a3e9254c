/* cpu_gemm.c — the CPU GEMM router and the packed Linear weights (cpu_gemm.h has the
 * contract).
 *
 * A weight's packs live in one weight_packs record attached to its storage
 * (tr_tensor_set_derived), one slot per product. A slot is current when it was made from
 * the same bytes (data pointer, shape, storage version) as the weight has now; otherwise
 * it is refilled in place (its block reused when the size matches). */
#include "cpu_gemm.h"
#include "backend.h"
#include "gemm_query.h"
#include "isa_max.h"
#include "tensor_version.h"
#include "gemm_onednn.h"
#include "cpu/matmul.h"
#include "blas_core.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { LIB_OPENBLAS = 0, LIB_ONEDNN = 1 };

struct tr_cpu_gemm {
    int lib;               /* LIB_* */
    tr_onednn *dnnl;       /* set when lib is LIB_ONEDNN */
    int blas_full_isa;     /* OpenBLAS runs kernels of the widest ISA this CPU has */
    int bf16_native;       /* -1 not decided yet, else tr_cpu_gemm_bf16_native's answer */
};

/* ------------------------------------------------------------ the library */

int tr_cpu_gemm_create(tr_cpu_gemm **out, tr_error *err)
{
    *out = NULL;
    const char *env = getenv("TRAINER_CPU_GEMM");
    int want = -1;   /* -1: the best available */
    if (env && *env) {
        if (strcmp(env, "openblas") == 0) want = LIB_OPENBLAS;
        else if (strcmp(env, "onednn") == 0) want = LIB_ONEDNN;
        else
            return tr_fail(err, TR_EUSER,
                           "TRAINER_CPU_GEMM=\"%s\" is not a CPU matrix library: set it to openblas or "
                           "onednn, or unset it (oneDNN when this build and machine have it, else OpenBLAS)",
                           env);
    }
    tr_cpu_gemm *g = calloc(1, sizeof *g);
    if (!g) return tr_fail(err, TR_EOOM, "out of host memory for the CPU GEMM router");
    g->lib = LIB_OPENBLAS;
    g->bf16_native = -1;
    /* (the host backend re-selected OpenBLAS's kernels before any product: blas_core.h; a
     * user's OPENBLAS_CORETYPE can still hold it below the CPU) */
    g->blas_full_isa = tr_blas_core_rank(tr_blas_core_name()) >= tr_blas_cpu_rank();
    if (want != LIB_OPENBLAS) {
        tr_error why;
        tr_error_clear(&why);
        if (tr_onednn_open(&g->dnnl, &why) == TR_OK) g->lib = LIB_ONEDNN;
        else if (want == LIB_ONEDNN) {
            free(g);
            return tr_fail(err, TR_EUSER, "TRAINER_CPU_GEMM=onednn: %s", why.msg);
        }
    }
    *out = g;
    return TR_OK;
}

void tr_cpu_gemm_free(tr_cpu_gemm *g)
{
    if (!g) return;
    tr_onednn_close(g->dnnl);
    free(g);
}

/* Through the registry, not host_context_backend.c's table: that file calls this one. */
tr_cpu_gemm *tr_ctx_cpu_gemm(tr_ctx *ctx) { return tr_ctx_backend_private(ctx, tr_backend_of(TR_CPU)); }

const char *tr_cpu_gemm_library(tr_ctx *ctx)
{
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return NULL;
    return g->lib == LIB_ONEDNN ? "onednn" : "openblas";
}

const char *tr_cpu_isa_max(void) { return TR_ISA_AVX512_ALLOWED ? "cpu" : "avx2"; }

/* Whether oneDNN runs an M x N x K product (op(A) M x K). Measured on the project's
 * machine with bench/bench_gemm_onednn.c: oneDNN is ahead on the Linear shapes of
 * MiniLM/BERT (forward and input gradient on packed weights by 35-45 % with 2 threads on
 * an idle machine, 0-17 % on one core). The bound is low enough that the test suite's tiny
 * models (hidden 32) run their Linears on oneDNN too, so that the suite's bit-exact checks
 * (resume, checkpointing) cover it. A skinny product, one side from 8 up but enough work
 * (LoRA's rank-8 factors at 4096 rows), goes to oneDNN too: `bench_gemm_onednn lora`, 2
 * threads, measured 1.2-2.8x OpenBLAS on all six of a LoRA layer's factor products (X A^T 96
 * against 43 GFLOP/s, dy^T a 76 against 27); smaller ones (a classifier head's 2 labels)
 * stay on OpenBLAS. */
enum { ONEDNN_MIN_SIDE = 32, ONEDNN_MIN_SKINNY_SIDE = 8 };
#define ONEDNN_MIN_SKINNY_MACS ((int64_t)1 << 22)

static int route_onednn(const tr_cpu_gemm *g, int M, int N, int K)
{
    if (!g || g->lib != LIB_ONEDNN || M <= 0) return 0;
    if (N >= ONEDNN_MIN_SIDE && K >= ONEDNN_MIN_SIDE) return 1;
    return M >= ONEDNN_MIN_SKINNY_SIDE && N >= ONEDNN_MIN_SKINNY_SIDE && K >= ONEDNN_MIN_SKINNY_SIDE &&
           (int64_t)M * N * K >= ONEDNN_MIN_SKINNY_MACS;
}

/* A plain (unpacked) product: oneDNN's with a wide plain B (N >= 2048, BERT-base's 3072) ran
 * at 0.3-0.4x OpenBLAS's AVX-512 kernels (Intel Xeon: weight gradient 768 x 3072 x 4096, 39
 * against 132 GFLOP/s on one core), the narrower ones at 0.9-1.2x. Where OpenBLAS runs
 * below the CPU's ISA (an AMD EPYC with AVX-512 whose environment set
 * OPENBLAS_CORETYPE=Haswell) oneDNN was ahead on every shape, the wide ones too: 370-440
 * against 215-235 GFLOP/s with 2 threads (bench_gemm_onednn). */
static int plain_onednn(const tr_cpu_gemm *g, int M, int N, int K)
{
    return route_onednn(g, M, N, K) && (N < 2048 || !g->blas_full_isa);
}

int tr_cpu_gemm_routes_onednn(tr_ctx *ctx, int M, int N, int K)
{
    return plain_onednn(tr_ctx_cpu_gemm(ctx), M, N, K);
}

/* ------------------------------------------------------------ packed weights */

typedef struct pack_slot {
    void *data;            /* CPU allocator block, tag workspace */
    size_t bytes;
    const void *src;       /* the weight's data pointer it was made from */
    int64_t O, I;
    uint64_t version;
    int valid;
} pack_slot;

typedef struct weight_packs {
    tr_alloc *alloc;
    pack_slot slot[2];     /* [TR_PACK_FORWARD], [TR_PACK_INPUT_GRAD] */
    int transient;         /* each pack lives for one product (tr_cpu_weight_transient_packs) */
} weight_packs;

static void packs_free(void *p)
{
    weight_packs *w = p;
    for (int i = 0; i < 2; i++)
        if (w->slot[i].data) tr_alloc_free(w->alloc, w->slot[i].data);
    free(w);
}

/* How `product` (TR_PACK_*) of an f32 weight [O, I] runs: PACK_NONE, the router's plain
 * product (OpenBLAS, or a side under ONEDNN_MIN_SIDE); PACK_SELF, oneDNN on the weight as
 * stored (its packed layout is that one); PACK_OWN, oneDNN on a copy of the weight in its
 * packed layout, of *bytes bytes (bytes may be NULL). */
enum { PACK_NONE = 0, PACK_SELF = 1, PACK_OWN = 2 };

static int pack_kind(const tr_cpu_gemm *g, int64_t O, int64_t I, int product, int *kind, size_t *bytes,
                     tr_error *err)
{
    *kind = PACK_NONE;
    if (bytes) *bytes = 0;
    /* forward: B = W^T, K = I, N = O, stored [N, K]; input gradient: B = W, K = O, N = I */
    int N = product == TR_PACK_FORWARD ? (int)O : (int)I, K = product == TR_PACK_FORWARD ? (int)I : (int)O;
    int transB = product == TR_PACK_FORWARD;
    if (!route_onednn(g, 1, N, K)) return TR_OK;
    /* Where the packed layout is the weight as stored (the input gradient's on AVX2: oneDNN's
     * sgemm packs panels of B inside each call), the pack would be a copy of every trained
     * weight after each step: the product takes the weight itself, the same descriptor and
     * bits. A transposing pack (the forward's there) stays: the plain transposed product
     * ran up to 2 % slower (bench_gemm_onednn), which a frozen weight, packed once, would
     * pay on every step. */
    int plain;
    int rc = tr_onednn_pack_plain(g->dnnl, N, K, transB, &plain, err);
    if (rc != TR_OK) return rc;
    if (plain == 1) {
        *kind = PACK_SELF;
        return TR_OK;
    }
    *kind = PACK_OWN;
    return bytes ? tr_onednn_pack_bytes(g->dnnl, N, K, transB, bytes, err) : TR_OK;
}

int tr_cpu_linear_pack_bytes(tr_ctx *ctx, int64_t O, int64_t I, int64_t bytes[2])
{
    bytes[0] = bytes[1] = 0;
    if (O <= 0 || I <= 0 || O > INT_MAX || I > INT_MAX)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "tr_cpu_linear_pack_bytes: a weight of [%lld, %lld]",
                       (long long)O, (long long)I);
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return tr_ctx_err(ctx)->status;
    for (int product = TR_PACK_FORWARD; product <= TR_PACK_INPUT_GRAD; product++) {
        int kind;
        size_t b;
        int rc = pack_kind(g, O, I, product, &kind, &b, tr_ctx_err(ctx));
        if (rc != TR_OK) return rc;
        bytes[product] = kind == PACK_OWN ? (int64_t)b : 0;
    }
    return TR_OK;
}

/* 1 when slot s holds a pack made from W's current bytes. */
static int slot_current(const pack_slot *s, const tr_tensor *w)
{
    return s->valid && s->src == w->data && s->O == w->shape[0] && s->I == w->shape[1] &&
           s->version == tr_tensor_version(w);
}

/* Frees w's pack for `product`, if any, and empties its slot. */
static void free_slot(weight_packs *wp, int product)
{
    pack_slot *o = &wp->slot[product];
    if (o->data) tr_alloc_free(wp->alloc, o->data);
    *o = (pack_slot){ 0 };
}

/* Frees w's pack for `product` when W was written since it was made (a trained weight after
 * an optimizer step), called as the other product runs: the pack is freed now rather than
 * when its own product next runs, so a forward ends holding the forward packs alone, not last
 * step's input-gradient packs beside them, at the moment the activations peak. A frozen
 * weight's packs stay current and are kept. */
static void drop_stale(weight_packs *wp, const tr_tensor *w, int product)
{
    if (wp->slot[product].data && !slot_current(&wp->slot[product], w)) free_slot(wp, product);
}

/* *wp = w's packs record, attached now if w had none; NULL (and TR_OK) for a header
 * without a storage to keep it beside (a test's tensor over its own buffer). */
static int packs_record(tr_ctx *ctx, const tr_tensor *w, weight_packs **wp)
{
    *wp = tr_tensor_derived(w);
    if (*wp) return TR_OK;
    weight_packs *n = calloc(1, sizeof *n);
    if (!n) return tr_fail(tr_ctx_err(ctx), TR_EOOM, "linear: out of host memory for a packed-weight record");
    n->alloc = tr_ctx_alloc(ctx, TR_CPU);
    if (tr_tensor_set_derived(w, n, packs_free) != 0) {
        free(n);
        return TR_OK;
    }
    *wp = n;
    return TR_OK;
}

int tr_cpu_weight_transient_packs(tr_ctx *ctx, const tr_tensor *w, int on)
{
    if (!w || w->ndim != 2 || w->device != TR_CPU || w->dtype != TR_F32) return TR_OK;
    weight_packs *wp;
    int rc = packs_record(ctx, w, &wp);
    if (rc != TR_OK || !wp) return rc;
    wp->transient = on != 0;
    if (wp->transient)
        for (int product = TR_PACK_FORWARD; product <= TR_PACK_INPUT_GRAD; product++) free_slot(wp, product);
    return TR_OK;
}

void tr_cpu_weight_pack_done(const tr_tensor *w, int product)
{
    weight_packs *wp = w ? tr_tensor_derived(w) : NULL;
    if (wp && wp->transient && (product == TR_PACK_FORWARD || product == TR_PACK_INPUT_GRAD)) free_slot(wp, product);
}

int tr_cpu_weight_packed(tr_ctx *ctx, const tr_tensor *w, int product, const void **packed)
{
    *packed = NULL;
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return tr_ctx_err(ctx)->status;
    if (w->ndim != 2 || w->device != TR_CPU || (product != TR_PACK_FORWARD && product != TR_PACK_INPUT_GRAD))
        return TR_OK;
    /* Half weights are not packed: their packs would be two f32 copies, four times the half
     * bytes that a user chose half precision to save (a frozen bf16 bert-large: 2.25 GiB of
     * packs for 640 MiB of weights), and on this project's machine they bought no speed
     * (bench/train_step.lua --config bf16-ckpt-lora, idle, 19:07 UTC: 2040 and 2059 tokens/s
     * packed against 2044 and 1978 on OpenBLAS, alternated, for 90 MiB more). */
    if (w->dtype != TR_F32) return TR_OK;
    int64_t O = w->shape[0], I = w->shape[1];
    int N = product == TR_PACK_FORWARD ? (int)O : (int)I, K = product == TR_PACK_FORWARD ? (int)I : (int)O;
    int transB = product == TR_PACK_FORWARD;
    int kind;
    int rc = pack_kind(g, O, I, product, &kind, NULL, tr_ctx_err(ctx));
    if (rc != TR_OK || kind == PACK_NONE) return rc;
    weight_packs *wp = tr_tensor_derived(w);
    if (kind == PACK_SELF) {
        if (wp) drop_stale(wp, w, !product);
        *packed = w->data;
        return TR_OK;
    }

    if (!wp && ((rc = packs_record(ctx, w, &wp)) != TR_OK || !wp)) return rc;   /* no record: the plain product */
    pack_slot *s = &wp->slot[product];
    if (slot_current(s, w)) {
        *packed = s->data;
        return TR_OK;
    }
    s->valid = 0;
    drop_stale(wp, w, !product);
    size_t bytes;
    rc = tr_onednn_pack_bytes(g->dnnl, N, K, transB, &bytes, tr_ctx_err(ctx));
    if (rc != TR_OK) return rc;
    if (s->data && s->bytes != bytes) {
        tr_alloc_free(wp->alloc, s->data);
        s->data = NULL;
    }
    if (!s->data && (rc = tr_alloc_malloc(wp->alloc, bytes, TR_TAG_WORKSPACE, 0, &s->data, tr_ctx_err(ctx))) != TR_OK)
        return rc;
    s->bytes = bytes;
    /* f32 only (above): the pack reads the weight's own memory */
    if ((rc = tr_onednn_pack(g->dnnl, s->data, w->data, N, K, transB, tr_ctx_err(ctx))) != TR_OK) return rc;
    *s = (pack_slot){ s->data, bytes, w->data, O, I, tr_tensor_version(w), 1 };
    *packed = s->data;
    return TR_OK;
}

int tr_cpu_linear_forward_packed(tr_ctx *ctx, float *Y, const float *X, const void *packed, const float *bias,
                                 int rows, int O, int I)
{
    if (rows == 0) return TR_OK;
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return tr_ctx_err(ctx)->status;
    return tr_onednn_gemm(g->dnnl, Y, X, packed, 1, bias, rows, O, I, 0, 1, 1.0f, 0.0f, tr_ctx_err(ctx));
}

int tr_cpu_linear_input_grad_packed(tr_ctx *ctx, float *dX, const float *dY, const void *packed, int rows, int O,
                                    int I, float beta)
{
    if (rows == 0) return TR_OK;
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return tr_ctx_err(ctx)->status;
    return tr_onednn_gemm(g->dnnl, dX, dY, packed, 1, NULL, rows, I, O, 0, 0, 1.0f, beta, tr_ctx_err(ctx));
}

/* ------------------------------------------------------------ plain products */

int tr_cpu_gemm_f32(tr_ctx *ctx, float *C, const float *A, const float *B, const float *bias, int M, int N, int K,
                    int transA, int transB, float alpha, float beta)
{
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return tr_ctx_err(ctx)->status;
    if (plain_onednn(g, M, N, K) && (!bias || alpha == 1.0f))
        return tr_onednn_gemm(g->dnnl, C, A, B, 0, bias, M, N, K, transA, transB, alpha, beta, tr_ctx_err(ctx));
    return tr_k_matmul_fwd_f32(C, A, B, bias, 1, M, N, K, transA, transB, alpha, beta, 0, 0, 0, tr_ctx_err(ctx));
}

/* ------------------------------------------------------------ bf16 products */

/* Where bf16 kernels beat staging to f32: AMX tiles on any CPU; AVX512-BF16 dot products on
 * AMD's cores, which issue them at twice the f32 FMA's work a cycle (EPYC, 2 threads:
 * 880-960 against 440-470 GFLOP/s on BERT-base's Linear shapes); not on Intel's AVX512-BF16
 * without AMX, where oneDNN's bf16 products ran at 130-167 against f32's 263-284 GFLOP/s
 * (measured on a Xeon without AMX). A CPU property, not a timing taken at start: the choice must be the
 * same in every process on a machine, or a resumed run would not repeat the bits. */
static int bf16_beats_f32(int isa)
{
    if (isa == TR_ONEDNN_BF16_AMX) return 1;
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == TR_ONEDNN_BF16_AVX512) {
        __builtin_cpu_init();
        return __builtin_cpu_is("amd") != 0;
    }
#endif
    return 0;
}

int tr_cpu_gemm_bf16_native(tr_ctx *ctx)
{
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g || g->lib != LIB_ONEDNN) return 0;
    if (g->bf16_native < 0) g->bf16_native = bf16_beats_f32(tr_onednn_bf16_isa(g->dnnl));
    return g->bf16_native;
}

int tr_cpu_gemm_bf16(tr_ctx *ctx, void *C, int c_dtype, const void *A, const void *B, const float *bias, int M,
                     int N, int K, int transA, int transB, float alpha, float beta)
{
    tr_cpu_gemm *g = tr_ctx_cpu_gemm(ctx);
    if (!g) return tr_ctx_err(ctx)->status;
    if (g->lib != LIB_ONEDNN || (c_dtype != TR_BF16 && c_dtype != TR_F32))
        return tr_fail(tr_ctx_err(ctx), TR_EINTERNAL,
                       "%s:%d: a bf16 product without oneDNN, or into dtype %d; this is a bug in the caller "
                       "(tr_cpu_gemm_bf16_native says where it runs)",
                       __FILE__, __LINE__, c_dtype);
    return tr_onednn_gemm_bf16(g->dnnl, C, c_dtype == TR_BF16, A, B, bias, M, N, K, transA, transB, alpha, beta,
                               tr_ctx_err(ctx));
}
