/* cuda_slot.h — what every CUDA slot of the op table (core/cuda_ops/, one file per family) shares: the
 * device's stream and cuBLASLt environment, workspace tensors that go back when the slot
 * ends, dtype staging between a tensor and the dtype a kernel wants, host <-> device
 * copies for the few ops whose contract has a host side, a GEMM over any float dtypes,
 * and the error wording "<op> on cuda:N: <cuda error>". Internal to core/; compiled only
 * with TR_HAVE_CUDA.
 *
 * A slot runs after the op table's checks (op_table.c: NULL rules, one device, dtype rules,
 * the op's shape check), so it only computes. Its shape:
 *     tr_cslot s;
 *     int rc = tr_cslot_begin(&s, ctx, "gelu", call->device);
 *     if (rc == TR_OK) rc = <launchers, each checked>;
 *     return tr_cslot_end(&s, rc);
 * Workspace comes from the device's caching allocator with tag workspace and is freed by
 * tr_cslot_end; freeing right after an asynchronous launch is safe because the allocator
 * reuses a block only in the order of the same stream. */
#ifndef TR_CUDA_SLOT_H
#define TR_CUDA_SLOT_H

#include "op_table.h"
#include "cuda/activation.h"
#include "cuda/attention.h"
#include "cuda/bias_gelu.h"
#include "cuda/dropout.h"
#include "cuda/dropout_add_layernorm.h"
#include "cuda/elementwise.h"
#include "cuda/embedding.h"
#include "cuda/pair_features.h"
#include "cuda/geglu.h"
#include "cuda/dropout_linear.h"
#include "cuda/matmul.h"
#include "cuda/index_check.h"
#include "cuda/layernorm.h"
#include "cuda/loss.h"
#include "cuda/op_support.h"
#include "cuda/optim.h"
#include "cuda/pooling.h"
#include "cuda/reduce.h"
#include "cuda/rotary.h"
#include "cuda/score_loss.h"
#include "cuda/similarity.h"
#include "cuda/softmax.h"

/* The CUDA slots, tr_opc_<op>: one per op of op_list.h, gathered into the CUDA backend's
 * table by cuda_backend.c. */
#define TR_OP(n, args, scalars) int tr_opc_##n(tr_ctx *ctx, tr_op_call *call);
#include "op_list.h"
#undef TR_OP

enum { TR_CSLOT_MAX_WS = 16 };

typedef struct tr_cslot {
    tr_ctx *ctx;
    tr_error *err;
    const char *op;
    int device;
    void *state;  /* core/cuda_device/cuda_device.h's state */
    void *stream; /* its cudaStream_t */
    const tr_cuda_blas *blas;    /* the cuBLASLt environment, fetched (and cuBLASLt loaded) by the first GEMM */
    tr_tensor *ws[TR_CSLOT_MAX_WS];
    int nws;
} tr_cslot;

/* Fetches the device state and makes the device current. */
int tr_cslot_begin(tr_cslot *s, tr_ctx *ctx, const char *op, int device);
/* Frees the workspace; a CUDA failure's message becomes "<op> on cuda:N: <message>".
 * Returns rc. */
int tr_cslot_end(tr_cslot *s, int rc);

/* *out = n elements of dtype in new workspace (at least one element). */
int tr_cslot_ws(tr_cslot *s, int64_t n, int dtype, void **out);

/* *out = t's data seen as `dtype`: t's own data when it has that dtype, else a converted
 * workspace copy. t NULL gives NULL. */
int tr_cslot_in(tr_cslot *s, const tr_tensor *t, int dtype, const void **out);
/* *out = where to write t's values as `dtype`: t's data, or workspace (holding t's
 * current values when load, for += and in-place ops); tr_cslot_store writes it back. */
int tr_cslot_out(tr_cslot *s, const tr_tensor *t, int dtype, int load, void **out);
int tr_cslot_store(tr_cslot *s, const tr_tensor *t, int dtype, const void *p);

/* Host <-> device bytes on the slot's stream. to_host synchronises the stream (the op's
 * result is needed on the host); to_device returns once the host buffer may be reused and,
 * up to 16 KiB, never waits for the stream (the bytes travel as kernel arguments). */
int tr_cslot_to_host(tr_cslot *s, void *host, const void *dev, size_t bytes);
int tr_cslot_to_device(tr_cslot *s, void *dev, const void *host, size_t bytes);
int tr_cslot_memset(tr_cslot *s, void *dev, int value, size_t bytes);

/* An index tensor (ids, targets: i32 or i64) checked on the device, with no wait for the host
 * (kernels/cuda/index_check.cu): *dev = its values as int64 in workspace, each bad one (outside
 * [0, limit), not ignore_index when has_ignore) replaced by the ignore index or -1; *count
 * (workspace, may be NULL) = the ones neither bad nor ignored. The first bad index goes into
 * the device's error word under `op` (a tr_k_index_op); the host learns of it from
 * tr_device_errors_check, where it synchronises anyway, with the CPU slot's message. */
int tr_cslot_indices_checked(tr_cslot *s, const tr_tensor *t, int64_t limit, int64_t ignore_index, int has_ignore,
                             int op, const int64_t **dev, int64_t **count);

/* A multi-tensor op's list as device records (tr_k_tensor_ref in workspace: one pageable
 * copy); *max_n = the largest tensor's element count. */
int tr_cslot_tensor_list(tr_cslot *s, tr_tensor *const *ts, int n, const tr_k_tensor_ref **out, int64_t *max_n);

/* AdamW's kernel arguments from an adamw or adamw_multi call (both lay them out alike:
 * f = lr, beta1, beta2, eps, weight decay, loss scale; i[0] = step), bias corrections in
 * double as the CPU computes them; no skip flag or skip count (the caller adds them). */
tr_k_adamw_args tr_cslot_adamw_args(const tr_op_call *c);

/* c (c_dt) = alpha op(a) op(b) + beta c + bias through cuBLASLt (bias in the epilogue), for
 * any float dtypes: a and b go to one dtype (theirs when equal, bf16 for bf16 beside f32, else
 * f32), c to f32 when
 * cuBLASLt cannot write its dtype from theirs, the bias to c's dtype, each through
 * workspace. d gives m, n, k, batch, strides, transposes, alpha and beta; its dtypes are
 * set here. na, nb, nc: the elements of a, b and c. */
int tr_cslot_gemm(tr_cslot *s, void *c, int c_dt, int64_t nc, const void *a, int a_dt, int64_t na, const void *b,
                  int b_dt, int64_t nb, const void *bias, int bias_dt, tr_cuda_gemm_desc d);

/* c (c_dt) = op(a) op(b) (alpha, beta, shape from d) with the fused epilogue d.epilogue
 * (kernels/cuda/matmul.h), in a's and b's dtype pair (as tr_cslot_gemm), c written directly
 * (c_dt f32 or the pair's). GELU_AUX reads bias (any dtype, or NULL) and writes d.aux, which
 * has c's dtype; BGRAD_A, and DGELU with dbias, ACCUMULATE (+=) the bias gradient into dbias
 * (f32: m elements for BGRAD_A, n for DGELU) through workspace. *fused = 0, with nothing
 * written, where cuBLASLt has no kernel for it or the dtypes or aux layout rule it out: the
 * caller then computes the product and its epilogue apart. */
int tr_cslot_gemm_fused(tr_cslot *s, void *c, int c_dt, const void *a, int a_dt, int64_t na, const void *b, int b_dt,
                        int64_t nb, const void *bias, int bias_dt, float *dbias, tr_cuda_gemm_desc d, int *fused);

/* A product's operand t as it should reach tr_cslot_gemm beside an operand of dtype other_dt:
 * *data, *dtype = t's own, except for an f32 weight (tag weights) beside bf16, which gives its
 * bf16 copy kept beside the weight and refreshed after each write of it (weight_half.c), so
 * the cast is made once per optimizer step, not once per product. t NULL gives NULL. */
int tr_cslot_product_operand(tr_cslot *s, const tr_tensor *t, int other_dt, const void **data, int *dtype);

/* Defines the slot tr_opc_<name> as a call of fn(s, ...) between tr_cslot_begin and
 * tr_cslot_end, the macro's tail being expressions over the call `c` (as TR_CPU_SLOT_BY does
 * for the CPU). */
#define TR_CSLOT_BY(name, fn, ...)                                                                                     \
    int tr_opc_##name(tr_ctx *ctx, tr_op_call *c)                                                                      \
    {                                                                                                                  \
        tr_cslot s;                                                                                                    \
        int rc = tr_cslot_begin(&s, ctx, #name, c->device);                                                            \
        if (rc == TR_OK) rc = fn(&s, __VA_ARGS__);                                                                     \
        return tr_cslot_end(&s, rc);                                                                                   \
    }

/* Defines the slot tr_opc_<name> around `static int name##_body(tr_cslot *s, tr_op_call *c)`. */
#define TR_CSLOT_DEFINE(name)                                                                                          \
    static int name##_body(tr_cslot *s, tr_op_call *c);                                                                \
    TR_CSLOT_BY(name, name##_body, c)

#endif
