/* cuda_slot.c — the CUDA slots' shared machinery (contract in cuda_slot.h). Compiled only
 * with TR_HAVE_CUDA: the ASan test build has no CUDA. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

#include "cuda_device.h"
#include "cuda/cuda_check.h"
#include "cuda_sync.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ begin, end */

int tr_cslot_begin(tr_cslot *s, tr_ctx *ctx, const char *op, int device)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->err = tr_ctx_err(ctx);
    s->op = op;
    s->device = device;
    s->state = tr_ctx_cuda_state(ctx, device);
    if (!s->state) return s->err->status != TR_OK ? s->err->status : TR_EINTERNAL;
    s->stream = tr_cuda_stream(s->state);
    /* s->blas stays NULL until a matrix product asks for it: that loads cuBLASLt */
    return tr_cuda_set_current(s->state, s->err);
}

int tr_cslot_end(tr_cslot *s, int rc)
{
    for (int i = 0; i < s->nws; i++) tr_tensor_free(s->ws[i]);
    s->nws = 0;
    if (rc == TR_EINTERNAL) {
        /* name the op and the device in front of the CUDA call's own words; a launcher's
         * "<kernel> on CUDA: " prefix would only repeat them */
        char msg[sizeof s->err->msg];
        memcpy(msg, s->err->msg, sizeof msg);
        msg[sizeof msg - 1] = '\0';
        const char *words = msg, *own = strstr(msg, " on CUDA: ");
        if (own && own - msg < 64) words = own + strlen(" on CUDA: ");
        snprintf(s->err->msg, sizeof s->err->msg, "%s on cuda:%d: %.1900s", s->op, s->device, words);
        s->err->status = rc;
    }
    return rc;
}

/* ------------------------------------------------------------ workspace, staging */

int tr_cslot_ws(tr_cslot *s, int64_t n, int dtype, void **out)
{
    *out = NULL;
    if (s->nws == TR_CSLOT_MAX_WS)
        return tr_fail(s->err, TR_EINTERNAL, "%s: more than %d workspace blocks in one op", s->op, TR_CSLOT_MAX_WS);
    int64_t len = n > 0 ? n : 1;
    tr_tensor *t = tr_tensor_new(s->ctx, 1, &len, dtype, s->device, TR_TAG_WORKSPACE);
    if (!t) return s->err->status != TR_OK ? s->err->status : TR_EOOM;
    s->ws[s->nws++] = t;
    *out = t->data;
    return TR_OK;
}

int tr_cslot_in(tr_cslot *s, const tr_tensor *t, int dtype, const void **out)
{
    *out = NULL;
    if (!t) return TR_OK;
    if (t->dtype == dtype) {
        *out = t->data;
        return TR_OK;
    }
    void *p;
    int rc = tr_cslot_ws(s, t->numel, dtype, &p);
    if (rc == TR_OK) rc = tr_k_cast_any_cuda(p, dtype, t->data, t->dtype, t->numel, s->stream, s->err);
    if (rc == TR_OK) *out = p;
    return rc;
}

int tr_cslot_out(tr_cslot *s, const tr_tensor *t, int dtype, int load, void **out)
{
    *out = NULL;
    if (!t) return TR_OK;
    if (t->dtype == dtype) {
        *out = t->data;
        return TR_OK;
    }
    void *p;
    int rc = tr_cslot_ws(s, t->numel, dtype, &p);
    if (rc == TR_OK && load) rc = tr_k_cast_any_cuda(p, dtype, t->data, t->dtype, t->numel, s->stream, s->err);
    if (rc == TR_OK) *out = p;
    return rc;
}

int tr_cslot_store(tr_cslot *s, const tr_tensor *t, int dtype, const void *p)
{
    if (!t || p == t->data) return TR_OK;
    return tr_k_cast_any_cuda(t->data, t->dtype, p, dtype, t->numel, s->stream, s->err);
}

/* ------------------------------------------------------------ host copies */

int tr_cslot_to_host(tr_cslot *s, void *host, const void *dev, size_t bytes)
{
    if (bytes == 0) return TR_OK;
    TR_CUDA_CHECK(s->err, tr_copy_to_host_async(host, dev, bytes, (cudaStream_t)s->stream));
    TR_CUDA_CHECK(s->err, tr_sync_stream((cudaStream_t)s->stream));
    return TR_OK;
}

int tr_cslot_to_device(tr_cslot *s, void *dev, const void *host, size_t bytes)
{
    if (bytes == 0) return TR_OK;
    /* A few bytes (an optimizer's parameter record, a tensor list, a counter) go as kernel
     * arguments: a copy from pageable memory may wait for the stream, which would make every
     * optimizer step synchronous. */
    if (bytes <= 16384) return tr_k_upload_cuda(dev, host, bytes, s->stream, s->err);
    /* Bigger ones (a batch's ids, after their check has synchronised anyway): the call
     * returns once the pageable bytes are staged, so the host buffer may go away. */
    TR_CUDA_CHECK(s->err, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)s->stream));
    return TR_OK;
}

int tr_cslot_indices_checked(tr_cslot *s, const tr_tensor *t, int64_t limit, int64_t ignore_index, int has_ignore,
                             int op, const int64_t **dev, int64_t **count)
{
    void *out, *cnt = NULL;
    int rc;
    if ((rc = tr_cslot_ws(s, t->numel > 0 ? t->numel : 1, TR_I64, &out)) ||
        (count && (rc = tr_cslot_ws(s, 1, TR_I64, &cnt))) ||
        (rc = tr_k_check_indices_cuda(out, t->data, t->dtype, t->numel, limit, ignore_index, has_ignore, cnt,
                                      tr_cuda_index_error(s->state), op, s->stream, s->err)))
        return rc;
    *dev = out;
    if (count) *count = cnt;
    return TR_OK;
}

int tr_cslot_memset(tr_cslot *s, void *dev, int value, size_t bytes)
{
    if (bytes == 0) return TR_OK;
    TR_CUDA_CHECK(s->err, cudaMemsetAsync(dev, value, bytes, (cudaStream_t)s->stream));
    return TR_OK;
}

/* ------------------------------------------------------------ GEMM */

static int cast_ws(tr_cslot *s, const void *p, int dt, int64_t n, int want, const void **out)
{
    *out = p;
    if (!p || dt == want) return TR_OK;
    void *w;
    int rc = tr_cslot_ws(s, n, want, &w);
    if (rc == TR_OK) rc = tr_k_cast_any_cuda(w, want, p, dt, n, s->stream, s->err);
    if (rc == TR_OK) *out = w;
    return rc;
}

/* The dtype a product's two operands run in: theirs when they agree; bf16 when one is bf16 and
 * the other f32 (the f32 one, a trainable weight or a LoRA factor beside bf16 activations, is
 * cast: the product then runs on the tensor cores, as under torch.autocast, where the f32 pair
 * would run at the CUDA cores' rate and convert the larger activation; bf16 has f32's exponent
 * range, so the cast cannot overflow); f32 for any other mix (f16 beside f32: a loss-scaled f32
 * gradient could overflow f16). The CPU computes a bf16 x f32 product in f32: the two differ by
 * the f32 operand's rounding to bf16, below the bf16 output's own. */
static int gemm_pair_dtype(int a_dt, int b_dt)
{
    if (a_dt == b_dt) return a_dt;
    if ((a_dt == TR_BF16 && b_dt == TR_F32) || (a_dt == TR_F32 && b_dt == TR_BF16)) return TR_BF16;
    return TR_F32;
}

/* One attempt with a and b in dtype ab. */
static int gemm_as(tr_cslot *s, int ab, void *c, int c_dt, int64_t nc, const void *a, int a_dt, int64_t na,
                   const void *b, int b_dt, int64_t nb, const void *bias, int bias_dt, tr_cuda_gemm_desc d)
{
    /* cuBLASLt writes f32 from any pair, and a half dtype from its own pair */
    int cd = (c_dt == TR_F32 || c_dt == ab) ? c_dt : TR_F32;
    const void *A, *B, *Bi;
    void *Cw = c;
    int rc;
    if ((rc = cast_ws(s, a, a_dt, na, ab, &A)) || (rc = cast_ws(s, b, b_dt, nb, ab, &B)) ||
        (rc = cast_ws(s, bias, bias_dt, d.n, cd, &Bi)))
        return rc;
    if (cd != c_dt) {
        if ((rc = tr_cslot_ws(s, nc, cd, &Cw))) return rc;
        if (d.beta != 0 && (rc = tr_k_cast_any_cuda(Cw, cd, c, c_dt, nc, s->stream, s->err))) return rc;
    }
    d.ab_dtype = ab;
    d.c_dtype = cd;
    d.tf32 = 0; /* the CPU computes in f32: TF32 would differ from it by ~1e-3 */
    if (!s->blas) s->blas = tr_cuda_blas_env(s->state);
    if ((rc = tr_k_matmul_fwd_cuda(s->blas, Cw, A, B, Bi, &d, s->err))) return rc;
    if (Cw != c) rc = tr_k_cast_any_cuda(c, c_dt, Cw, cd, nc, s->stream, s->err);
    return rc;
}

int tr_cslot_gemm(tr_cslot *s, void *c, int c_dt, int64_t nc, const void *a, int a_dt, int64_t na, const void *b,
                  int b_dt, int64_t nb, const void *bias, int bias_dt, tr_cuda_gemm_desc d)
{
    int ab = gemm_pair_dtype(a_dt, b_dt);
    int rc = gemm_as(s, ab, c, c_dt, nc, a, a_dt, na, b, b_dt, nb, bias, bias_dt, d);
    /* Half operands of odd sizes are only 2-byte aligned, for which cuBLASLt may have no
     * kernel (NOT_SUPPORTED, or no algorithm): the same product in f32 always has one. A
     * failure of another kind fails the f32 attempt too and is reported from there. */
    if (rc == TR_EINTERNAL && ab != TR_F32) {
        tr_error_clear(s->err);
        rc = gemm_as(s, TR_F32, c, c_dt, nc, a, a_dt, na, b, b_dt, nb, bias, bias_dt, d);
    }
    /* A bias epilogue (over a strided batch, the bias shared by every item) may have no
     * kernel either: the product without it, then the bias added over all batch * m rows. */
    if (rc == TR_EINTERNAL && bias && (d.batch == 1 || d.stride_c == d.m * d.n)) {
        tr_error_clear(s->err);
        rc = gemm_as(s, TR_F32, c, c_dt, nc, a, a_dt, na, b, b_dt, nb, NULL, TR_F32, d);
        if (rc == TR_OK)
            rc = tr_k_binary_bcast_cuda(c, c_dt, c, c_dt, bias, bias_dt, d.batch * d.m, d.n, 1, 0, s->stream, s->err);
    }
    return rc;
}

int tr_cslot_gemm_fused(tr_cslot *s, void *c, int c_dt, const void *a, int a_dt, int64_t na, const void *b, int b_dt,
                        int64_t nb, const void *bias, int bias_dt, float *dbias, tr_cuda_gemm_desc d, int *fused)
{
    const int ab = gemm_pair_dtype(a_dt, b_dt);
    const int aux = d.epilogue == TR_GEMM_EPI_GELU_AUX || d.epilogue == TR_GEMM_EPI_DGELU;
    const int writes_bias = d.epilogue == TR_GEMM_EPI_BGRAD_A || (d.epilogue == TR_GEMM_EPI_DGELU && dbias);
    const int64_t bias_n = d.epilogue == TR_GEMM_EPI_BGRAD_A ? d.m : d.n;
    const void *A, *B, *Bi = NULL;
    void *G = NULL;
    int rc;
    *fused = 0;
    if ((c_dt != TR_F32 && c_dt != ab) || (aux && (d.aux_ld < d.n || d.aux_ld % 8)) || (writes_bias && !dbias))
        return TR_OK;
    if ((rc = cast_ws(s, a, a_dt, na, ab, &A)) || (rc = cast_ws(s, b, b_dt, nb, ab, &B))) return rc;
    if (d.epilogue == TR_GEMM_EPI_GELU_AUX && (rc = cast_ws(s, bias, bias_dt, d.n, c_dt, &Bi))) return rc;
    if (writes_bias) {
        if ((rc = tr_cslot_ws(s, bias_n, c_dt, &G))) return rc;
        Bi = G;
    }
    d.ab_dtype = ab;
    d.c_dtype = c_dt;
    d.tf32 = 0; /* as tr_cslot_gemm: the CPU computes in f32 */
    if (!s->blas) s->blas = tr_cuda_blas_env(s->state);
    rc = tr_k_matmul_fwd_cuda(s->blas, c, A, B, Bi, &d, s->err);
    if (rc == TR_EINTERNAL) { /* no kernel for the epilogue here: nothing ran */
        tr_error_clear(s->err);
        return TR_OK;
    }
    if (rc == TR_OK && G) rc = tr_k_colsum_acc_cuda(dbias, G, c_dt, 1, bias_n, s->stream, s->err);
    if (rc == TR_OK) *fused = 1;
    return rc;
}

int tr_cslot_tensor_list(tr_cslot *s, tr_tensor *const *ts, int n, const tr_k_tensor_ref **out, int64_t *max_n)
{
    tr_k_tensor_ref *host = calloc((size_t)(n > 0 ? n : 1), sizeof *host);
    if (!host) return tr_fail(s->err, TR_EOOM, "%s: out of host memory for a list of %d tensors", s->op, n);
    *max_n = 0;
    for (int i = 0; i < n; i++) {
        host[i] = (tr_k_tensor_ref){.data = ts[i]->data, .n = ts[i]->numel, .dtype = ts[i]->dtype, .flags = 0};
        if (ts[i]->numel > *max_n) *max_n = ts[i]->numel;
    }
    const size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof *host;
    void *dev = NULL;
    int rc = tr_cslot_ws(s, (int64_t)((bytes + 7) / 8), TR_I64, &dev);
    if (rc == TR_OK) rc = tr_cslot_to_device(s, dev, host, bytes);
    free(host);
    *out = dev;
    return rc;
}

tr_k_adamw_args tr_cslot_adamw_args(const tr_op_call *c)
{
    const double step = (double)c->i[0];
    return (tr_k_adamw_args){
        .lr = c->f[0],
        .beta1 = c->f[1],
        .beta2 = c->f[2],
        .eps = c->f[3],
        .weight_decay = c->f[4],
        .bias_c1 = (float)(1.0 - pow((double)c->f[1], step)),
        .bias_c2_sqrt = (float)sqrt(1.0 - pow((double)c->f[2], step)),
        .inv_grad_scale = 1.0f / c->f[5],
        .step = c->i[0],
    };
}

#endif
