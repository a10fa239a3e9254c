/* gemm_onednn.c — oneDNN's matmul primitive behind gemm_onednn.h, over the library's
 * 2.x C API resolved by dlsym (the build links nothing of it).
 *
 * Caches: one entry per product (shape, transposes, packed or not, bias, alpha, beta),
 * holding the primitive and its memory objects, whose data handles are set on every call
 * (cheap); one entry per packed layout (N, K, transB) holding the layout and the reorder
 * that fills it. Both are small arrays scanned linearly (a training run meets a few dozen
 * shapes); when full, the least recently used entry is destroyed. oneDNN's packed layout
 * of B depends on N, K and the CPU, not on M (checked on this machine for M = 1..4096),
 * and a product on packed B is created for exactly the pack's layout, so a pack made for
 * one M serves every M. */
#include "gemm_onednn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TR_HAVE_DNNL

#include <dlfcn.h>
#include <dnnl.h>
#include <dnnl_debug.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define DNNL_SONAME "libdnnl.so." STR(DNNL_VERSION_MAJOR)

/* The library's entry points this file uses: X(name). */
#define DNNL_FUNCS(X)                                                                                \
    X(dnnl_engine_create) X(dnnl_engine_destroy) X(dnnl_stream_create) X(dnnl_stream_destroy)       \
    X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_equal)                   \
    X(dnnl_memory_desc_get_size) X(dnnl_matmul_desc_init) X(dnnl_primitive_attr_create)             \
    X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_output_scales) X(dnnl_post_ops_create) \
    X(dnnl_post_ops_append_sum) X(dnnl_post_ops_destroy) X(dnnl_primitive_attr_set_post_ops)        \
    X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy) X(dnnl_primitive_desc_query)       \
    X(dnnl_primitive_desc_query_md) X(dnnl_primitive_create) X(dnnl_primitive_destroy)              \
    X(dnnl_primitive_execute) X(dnnl_memory_create) X(dnnl_memory_destroy)                          \
    X(dnnl_memory_set_data_handle) X(dnnl_reorder_primitive_desc_create) X(dnnl_status2str)

enum { GEMM_SLOTS = 96, LAYOUT_SLOTS = 48 };

typedef struct gemm_key {
    int M, N, K, ta, tb, packed, bias;
    int ab_bf16, c_bf16;           /* A and B bf16 (else f32); C bf16 (else f32) */
    float alpha, beta;
} gemm_key;

typedef struct gemm_entry {
    gemm_key key;
    uint64_t used;                 /* tick of the last use; 0 = empty slot */
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, bia;
    char impl[64];                 /* the implementation's name, for the benchmark */
} gemm_entry;

typedef struct layout_entry {
    int N, K, tb;
    uint64_t used;
    dnnl_memory_desc_t packed;     /* the layout oneDNN chose for B */
    size_t bytes;
    int plain;                     /* 1: that layout is B as stored (a pack would be a copy);
                                      2: it is B transposed, unblocked (a pack would transpose) */
    dnnl_primitive_t reorder;      /* plain B -> packed */
    dnnl_memory_t from, to;
} layout_entry;

struct tr_onednn {
    void *lib;
#define X(n) __typeof__(&n) n;
    DNNL_FUNCS(X)
#undef X
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int bf16_isa;                  /* 0 not asked yet, else 1 + TR_ONEDNN_BF16_* */
    uint64_t tick;
    gemm_entry gemm[GEMM_SLOTS];
    layout_entry layout[LAYOUT_SLOTS];
};

/* ------------------------------------------------------------ errors */

/* A oneDNN call's status; `what` names the call. */
#define DNNL_CHECK(d, err, call, what, M, N, K)                                          \
    do {                                                                                 \
        dnnl_status_t st_ = (call);                                                      \
        if (st_ != dnnl_success) return fail((d), (err), st_, (what), __LINE__, (M), (N), (K)); \
    } while (0)

static int fail(tr_onednn *d, tr_error *err, dnnl_status_t st, const char *what, int line, int M, int N, int K)
{
    const char *text = d && d->dnnl_status2str ? d->dnnl_status2str(st) : "?";
    return tr_fail(err, st == dnnl_out_of_memory ? TR_EOOM : TR_EINTERNAL,
                   "%s:%d: oneDNN %s failed with status %d (%s) for a %d x %d x %d product; "
                   "TRAINER_CPU_GEMM=openblas runs the CPU matrix products on OpenBLAS instead",
                   __FILE__, line, what, (int)st, text, M, N, K);
}

/* ------------------------------------------------------------ lifetime */

int tr_onednn_built(void) { return 1; }

int tr_onednn_open(tr_onednn **out, tr_error *err)
{
    *out = NULL;
    tr_onednn *d = calloc(1, sizeof *d);
    if (!d) return tr_fail(err, TR_EOOM, "oneDNN: out of host memory for its handle");
    d->lib = dlopen(DNNL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        const char *why = dlerror();
        free(d);
        return tr_fail(err, TR_EUSER,
                       "oneDNN: %s cannot be loaded (%s); install libdnnl2 (Debian) or set "
                       "TRAINER_CPU_GEMM=openblas",
                       DNNL_SONAME, why ? why : "not found");
    }
#define X(n)                                                                                         \
    d->n = (__typeof__(&n))dlsym(d->lib, #n);                                                        \
    if (!d->n) {                                                                                     \
        dlclose(d->lib);                                                                             \
        free(d);                                                                                     \
        return tr_fail(err, TR_EUSER, "oneDNN: %s has no symbol %s (another major version?); set " \
                       "TRAINER_CPU_GEMM=openblas", DNNL_SONAME, #n);                               \
    }
    DNNL_FUNCS(X)
#undef X
#ifdef TR_ISA_MAX_AVX2
    /* an ISA_MAX=avx2 build (isa_max.h): oneDNN's kernels too stop at AVX2 */
    dnnl_status_t (*set_isa)(dnnl_cpu_isa_t) = (__typeof__(set_isa))dlsym(d->lib, "dnnl_set_max_cpu_isa");
    if (!set_isa) {
        dlclose(d->lib);
        free(d);
        return tr_fail(err, TR_EUSER, "oneDNN: %s has no dnnl_set_max_cpu_isa, so this ISA_MAX=avx2 build cannot "
                       "hold it at AVX2; set TRAINER_CPU_GEMM=openblas", DNNL_SONAME);
    }
    dnnl_status_t capped = set_isa(dnnl_cpu_isa_avx2);
    if (capped != dnnl_success) {
        tr_fail(err, TR_EUSER, "oneDNN: dnnl_set_max_cpu_isa(avx2) failed (%s), so this ISA_MAX=avx2 build cannot "
                "hold %s at AVX2; set TRAINER_CPU_GEMM=openblas", d->dnnl_status2str(capped), DNNL_SONAME);
        dlclose(d->lib);
        free(d);
        return TR_EUSER;
    }
#endif
    dnnl_status_t st = d->dnnl_engine_create(&d->engine, dnnl_cpu, 0);
    if (st == dnnl_success) st = d->dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        int rc = fail(d, err, st, "engine/stream creation", __LINE__, 0, 0, 0);
        tr_onednn_close(d);
        return rc == TR_EOOM ? rc : TR_EUSER;
    }
    *out = d;
    return TR_OK;
}

static void gemm_clear(tr_onednn *d, gemm_entry *e)
{
    if (e->prim) d->dnnl_primitive_destroy(e->prim);
    dnnl_memory_t m[4] = { e->src, e->wei, e->dst, e->bia };
    for (int i = 0; i < 4; i++)
        if (m[i]) d->dnnl_memory_destroy(m[i]);
    memset(e, 0, sizeof *e);
}

static void layout_clear(tr_onednn *d, layout_entry *e)
{
    if (e->reorder) d->dnnl_primitive_destroy(e->reorder);
    if (e->from) d->dnnl_memory_destroy(e->from);
    if (e->to) d->dnnl_memory_destroy(e->to);
    memset(e, 0, sizeof *e);
}

void tr_onednn_close(tr_onednn *d)
{
    if (!d) return;
    for (int i = 0; i < GEMM_SLOTS; i++) gemm_clear(d, &d->gemm[i]);
    for (int i = 0; i < LAYOUT_SLOTS; i++) layout_clear(d, &d->layout[i]);
    if (d->stream) d->dnnl_stream_destroy(d->stream);
    if (d->engine) d->dnnl_engine_destroy(d->engine);
    /* the library stays mapped: its own thread-local caches outlive the handle */
    free(d);
}

/* ------------------------------------------------------------ descriptors */

/* A 2-D descriptor of rows x cols stored row-major (ab) or transposed (ba); f32 unless bf16. */
static dnnl_status_t md2t(tr_onednn *d, dnnl_memory_desc_t *md, int rows, int cols, int trans, int bf16)
{
    dnnl_dims_t dims = { rows, cols };
    return d->dnnl_memory_desc_init_by_tag(md, 2, dims, bf16 ? dnnl_bf16 : dnnl_f32, trans ? dnnl_ba : dnnl_ab);
}

static dnnl_status_t md2(tr_onednn *d, dnnl_memory_desc_t *md, int rows, int cols, int trans)
{
    return md2t(d, md, rows, cols, trans, 0);
}

/* A primitive descriptor for src (M x K) x weights (K x N) -> dst with attr (may be NULL). */
static dnnl_status_t matmul_pd(tr_onednn *d, dnnl_primitive_desc_t *pd, const dnnl_memory_desc_t *src,
                               const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias,
                               const dnnl_memory_desc_t *dst, dnnl_primitive_attr_t attr)
{
    dnnl_matmul_desc_t op;
    dnnl_status_t st = d->dnnl_matmul_desc_init(&op, src, wei, bias, dst);
    if (st != dnnl_success) return st;
    return d->dnnl_primitive_desc_create(pd, &op, attr, d->engine, NULL);
}

/* ------------------------------------------------------------ packed layouts */

static layout_entry *layout_get(tr_onednn *d, int N, int K, int tb, tr_error *err, int *rc)
{
    *rc = TR_OK;
    layout_entry *victim = &d->layout[0];
    for (int i = 0; i < LAYOUT_SLOTS; i++) {
        layout_entry *e = &d->layout[i];
        if (e->used && e->N == N && e->K == K && e->tb == tb) {
            e->used = ++d->tick;
            return e;
        }
        if (e->used < victim->used) victim = e;
    }
    layout_clear(d, victim);
    layout_entry *e = victim;
    /* The layout oneDNN picks for weights of "any" format in a product of this N and K
     * (M = 256: any M gives the same one, see the top of the file). */
    dnnl_memory_desc_t src, wei, dst, plain;
    dnnl_dims_t wdims = { K, N };
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_status_t st = md2(d, &src, 256, K, 0);
    if (st == dnnl_success) st = d->dnnl_memory_desc_init_by_tag(&wei, 2, wdims, dnnl_f32, dnnl_format_tag_any);
    if (st == dnnl_success) st = md2(d, &dst, 256, N, 0);
    if (st == dnnl_success) st = md2(d, &plain, K, N, tb);
    if (st == dnnl_success) st = matmul_pd(d, &pd, &src, &wei, NULL, &dst, NULL);
    if (st == dnnl_success) {
        const dnnl_memory_desc_t *q = d->dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (q) e->packed = *q;
        else st = dnnl_runtime_error;
    }
    if (st == dnnl_success) {
        e->bytes = d->dnnl_memory_desc_get_size(&e->packed);
        dnnl_memory_desc_t row_major;
        e->plain = d->dnnl_memory_desc_equal(&e->packed, &plain) ? 1 : 0;
        if (!e->plain && tb && md2(d, &row_major, K, N, 0) == dnnl_success &&
            d->dnnl_memory_desc_equal(&e->packed, &row_major))
            e->plain = 2;
    }
    if (st == dnnl_success)
        st = d->dnnl_reorder_primitive_desc_create(&rpd, &plain, d->engine, &e->packed, d->engine, NULL);
    if (st == dnnl_success) st = d->dnnl_primitive_create(&e->reorder, rpd);
    if (st == dnnl_success) st = d->dnnl_memory_create(&e->from, &plain, d->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = d->dnnl_memory_create(&e->to, &e->packed, d->engine, DNNL_MEMORY_NONE);
    if (pd) d->dnnl_primitive_desc_destroy(pd);
    if (rpd) d->dnnl_primitive_desc_destroy(rpd);
    if (st != dnnl_success) {
        layout_clear(d, e);
        *rc = fail(d, err, st, "packed-layout query", __LINE__, 256, N, K);
        return NULL;
    }
    e->N = N;
    e->K = K;
    e->tb = tb;
    e->used = ++d->tick;
    return e;
}

int tr_onednn_pack_bytes(tr_onednn *d, int N, int K, int transB, size_t *bytes, tr_error *err)
{
    int rc;
    layout_entry *e = layout_get(d, N, K, transB != 0, err, &rc);
    *bytes = e ? e->bytes : 0;
    return rc;
}

int tr_onednn_pack_plain(tr_onednn *d, int N, int K, int transB, int *plain, tr_error *err)
{
    int rc;
    layout_entry *e = layout_get(d, N, K, transB != 0, err, &rc);
    *plain = e ? e->plain : 0;
    return rc;
}

int tr_onednn_pack(tr_onednn *d, void *dst, const float *B, int N, int K, int transB, tr_error *err)
{
    int rc;
    layout_entry *e = layout_get(d, N, K, transB != 0, err, &rc);
    if (!e) return rc;
    DNNL_CHECK(d, err, d->dnnl_memory_set_data_handle(e->from, (void *)B), "memory_set_data_handle", 0, N, K);
    DNNL_CHECK(d, err, d->dnnl_memory_set_data_handle(e->to, dst), "memory_set_data_handle", 0, N, K);
    dnnl_exec_arg_t args[2] = { { DNNL_ARG_FROM, e->from }, { DNNL_ARG_TO, e->to } };
    DNNL_CHECK(d, err, d->dnnl_primitive_execute(e->reorder, d->stream, 2, args), "reorder (packing)", 0, N, K);
    DNNL_CHECK(d, err, d->dnnl_stream_wait(d->stream), "stream_wait", 0, N, K);
    return TR_OK;
}

/* ------------------------------------------------------------ products */

static int key_eq(const gemm_key *a, const gemm_key *b)
{
    return a->M == b->M && a->N == b->N && a->K == b->K && a->ta == b->ta && a->tb == b->tb &&
           a->packed == b->packed && a->bias == b->bias && a->ab_bf16 == b->ab_bf16 && a->c_bf16 == b->c_bf16 &&
           a->alpha == b->alpha && a->beta == b->beta;
}

/* Creates the primitive and memory objects of e for key k. */
static dnnl_status_t gemm_make(tr_onednn *d, gemm_entry *e, const gemm_key *k, const layout_entry *lay)
{
    dnnl_memory_desc_t src, wei, dst, bia;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_status_t st = md2t(d, &src, k->M, k->K, k->ta, k->ab_bf16);
    if (st == dnnl_success) {
        if (lay) wei = lay->packed;
        else st = md2t(d, &wei, k->K, k->N, k->tb, k->ab_bf16);
    }
    if (st == dnnl_success) st = md2t(d, &dst, k->M, k->N, 0, k->c_bf16);
    if (st == dnnl_success && k->bias) st = md2(d, &bia, 1, k->N, 0);
    if (st == dnnl_success) st = d->dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success && k->alpha != 1.0f) st = d->dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (st == dnnl_success && k->beta != 0.0f) {
        st = d->dnnl_post_ops_create(&ops);
        if (st == dnnl_success) st = d->dnnl_post_ops_append_sum(ops, k->beta);
        if (st == dnnl_success) st = d->dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (st == dnnl_success) st = matmul_pd(d, &pd, &src, &wei, k->bias ? &bia : NULL, &dst, attr);
    if (st == dnnl_success) st = d->dnnl_primitive_create(&e->prim, pd);
    if (st == dnnl_success) st = d->dnnl_memory_create(&e->src, &src, d->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = d->dnnl_memory_create(&e->wei, &wei, d->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = d->dnnl_memory_create(&e->dst, &dst, d->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success && k->bias) st = d->dnnl_memory_create(&e->bia, &bia, d->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) {
        const char *impl = NULL;
        if (d->dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(e->impl, sizeof e->impl, "%s", impl);
    }
    if (pd) d->dnnl_primitive_desc_destroy(pd);
    if (ops) d->dnnl_post_ops_destroy(ops);
    if (attr) d->dnnl_primitive_attr_destroy(attr);
    return st;
}

static gemm_entry *gemm_get(tr_onednn *d, const gemm_key *k, tr_error *err, int *rc)
{
    *rc = TR_OK;
    gemm_entry *victim = &d->gemm[0];
    for (int i = 0; i < GEMM_SLOTS; i++) {
        gemm_entry *e = &d->gemm[i];
        if (e->used && key_eq(&e->key, k)) {
            e->used = ++d->tick;
            return e;
        }
        if (e->used < victim->used) victim = e;
    }
    const layout_entry *lay = NULL;
    if (k->packed && !(lay = layout_get(d, k->N, k->K, k->tb, err, rc))) return NULL;
    gemm_clear(d, victim);
    dnnl_status_t st = gemm_make(d, victim, k, lay);
    if (st != dnnl_success) {
        gemm_clear(d, victim);
        *rc = fail(d, err, st, "matmul primitive creation", __LINE__, k->M, k->N, k->K);
        return NULL;
    }
    victim->key = *k;
    victim->used = ++d->tick;
    return victim;
}

/* Runs the product of key k (its primitive made on first use) on these buffers. */
static int gemm_run(tr_onednn *d, const gemm_key *k, void *C, const void *A, const void *B, const float *bias,
                    tr_error *err)
{
    int M = k->M, N = k->N, K = k->K;
    if (M <= 0 || N <= 0 || K <= 0 || (bias && k->alpha != 1.0f))
        return tr_fail(err, TR_EINTERNAL,
                       "%s:%d: a oneDNN product was given M=%d N=%d K=%d (all must be > 0) and alpha %g "
                       "with%s a bias (a bias needs alpha 1); this is a bug in the caller",
                       __FILE__, __LINE__, M, N, K, (double)k->alpha, bias ? "" : "out");
    int rc;
    gemm_entry *e = gemm_get(d, k, err, &rc);
    if (!e) return rc;
    DNNL_CHECK(d, err, d->dnnl_memory_set_data_handle(e->src, (void *)A), "memory_set_data_handle", M, N, K);
    DNNL_CHECK(d, err, d->dnnl_memory_set_data_handle(e->wei, (void *)B), "memory_set_data_handle", M, N, K);
    DNNL_CHECK(d, err, d->dnnl_memory_set_data_handle(e->dst, C), "memory_set_data_handle", M, N, K);
    dnnl_exec_arg_t args[4] = { { DNNL_ARG_SRC, e->src }, { DNNL_ARG_WEIGHTS, e->wei }, { DNNL_ARG_DST, e->dst } };
    int nargs = 3;
    if (bias) {
        DNNL_CHECK(d, err, d->dnnl_memory_set_data_handle(e->bia, (void *)bias), "memory_set_data_handle", M, N, K);
        args[nargs++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, e->bia };
    }
    DNNL_CHECK(d, err, d->dnnl_primitive_execute(e->prim, d->stream, nargs, args), "matmul execution", M, N, K);
    DNNL_CHECK(d, err, d->dnnl_stream_wait(d->stream), "stream_wait", M, N, K);
    return TR_OK;
}

int tr_onednn_gemm(tr_onednn *d, float *C, const float *A, const void *B, int b_packed, const float *bias,
                   int M, int N, int K, int transA, int transB, float alpha, float beta, tr_error *err)
{
    gemm_key k = { M, N, K, transA != 0, transB != 0, b_packed != 0, bias != NULL, 0, 0, alpha, beta };
    return gemm_run(d, &k, C, A, B, bias, err);
}

int tr_onednn_gemm_bf16(tr_onednn *d, void *C, int c_bf16, const uint16_t *A, const uint16_t *B, const float *bias,
                        int M, int N, int K, int transA, int transB, float alpha, float beta, tr_error *err)
{
    gemm_key k = { M, N, K, transA != 0, transB != 0, 0, bias != NULL, 1, c_bf16 != 0, alpha, beta };
    return gemm_run(d, &k, C, A, B, bias, err);
}

int tr_onednn_bf16_isa(tr_onednn *d)
{
    if (!d->bf16_isa) {
        /* What oneDNN picks for a small bf16 product: its kernels for the CPU's bf16
         * instructions name them (brg:avx512_core_amx, brg:avx512_core_bf16); anything else
         * (gemm:jit's conversion to f32 on plain AVX-512, ref:any) is none. A failure to
         * make the primitive reads as none: the staged path needs nothing of it. */
        gemm_key k = { 64, 64, 64, 0, 1, 0, 0, 1, 1, 1.0f, 0.0f };
        tr_error scratch;
        tr_error_clear(&scratch);
        int rc;
        gemm_entry *e = gemm_get(d, &k, &scratch, &rc);
        d->bf16_isa = !e                       ? TR_ONEDNN_BF16_NONE + 1
                      : strstr(e->impl, "amx")  ? TR_ONEDNN_BF16_AMX + 1
                      : strstr(e->impl, "bf16") ? TR_ONEDNN_BF16_AVX512 + 1
                                                : TR_ONEDNN_BF16_NONE + 1;
    }
    return d->bf16_isa - 1;
}

const char *tr_onednn_impl(tr_onednn *d, int M, int N, int K, int transA, int transB, int b_packed, tr_error *err)
{
    gemm_key k = { M, N, K, transA != 0, transB != 0, b_packed != 0, 0, 0, 0, 1.0f, 0.0f };
    int rc;
    gemm_entry *e = gemm_get(d, &k, err, &rc);
    return e ? e->impl : NULL;
}

#else /* no oneDNN headers at build time */

static int not_built(tr_error *err)
{
    return tr_fail(err, TR_EUSER,
                   "oneDNN: this build of trainer has no oneDNN (libdnnl-dev was missing at build time); "
                   "install it and rebuild, or leave TRAINER_CPU_GEMM unset (OpenBLAS)");
}

int tr_onednn_built(void) { return 0; }
int tr_onednn_open(tr_onednn **out, tr_error *err)
{
    *out = NULL;
    return not_built(err);
}
void tr_onednn_close(tr_onednn *d) { (void)d; }
int tr_onednn_pack_bytes(tr_onednn *d, int N, int K, int transB, size_t *bytes, tr_error *err)
{
    *bytes = 0;
    return not_built(err);
}
int tr_onednn_pack_plain(tr_onednn *d, int N, int K, int transB, int *plain, tr_error *err)
{
    *plain = 0;
    return not_built(err);
}
int tr_onednn_pack(tr_onednn *d, void *dst, const float *B, int N, int K, int transB, tr_error *err)
{
    return not_built(err);
}
int tr_onednn_gemm(tr_onednn *d, float *C, const float *A, const void *B, int b_packed, const float *bias,
                   int M, int N, int K, int transA, int transB, float alpha, float beta, tr_error *err)
{
    return not_built(err);
}
int tr_onednn_gemm_bf16(tr_onednn *d, void *C, int c_bf16, const uint16_t *A, const uint16_t *B, const float *bias,
                        int M, int N, int K, int transA, int transB, float alpha, float beta, tr_error *err)
{
    return not_built(err);
}
int tr_onednn_bf16_isa(tr_onednn *d)
{
    (void)d;
    return TR_ONEDNN_BF16_NONE;
}
const char *tr_onednn_impl(tr_onednn *d, int M, int N, int K, int transA, int transB, int b_packed, tr_error *err)
{
    not_built(err);
    return NULL;
}

#endif
