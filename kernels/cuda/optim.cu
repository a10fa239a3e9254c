/* optim.cu — the optimizers on the GPU as multi-tensor launches: one launch updates every
 * parameter of the list (grid: chunks of the largest parameter x parameters), reading the
 * fp32 gradient, updating the fp32 master and its moments in place, and refreshing the
 * half copy the forward reads when there is one. A device flag can skip the step (the
 * fp16 loss scaler found an inf), so no host round trip decides it.
 * The step number can come from the device loss scale's skip count too (AdamW's bias
 * corrections, SGD's first step), for the same reason.
 * Formulas: kernels/cpu/adamw.c (AdamW) and sgd_adafactor.c (SGD), i.e. torch's. */
#include "cuda/optim.h"
#include "cuda/dtype.cuh"

enum { OPT_THREADS = 256, OPT_CHUNK = 65536 };

__global__ void adamw_kernel(const tr_k_param_ref *list, tr_k_adamw_args a)
{
    if (a.skip && *a.skip) return;
    const tr_k_param_ref r = list[blockIdx.y];
    const int64_t lo = (int64_t)blockIdx.x * OPT_CHUNK;
    const int64_t hi = lo + OPT_CHUNK < r.n ? lo + OPT_CHUNK : r.n;
    float c1 = a.bias_c1, c2 = a.bias_c2_sqrt;
    if (a.skipped) {
        /* the host's double arithmetic (core/cuda_ops/multi_tensor_cuda.c) on the true step */
        const double st = (double)(a.step - ((int64_t)*a.skipped - a.skipped_known));
        c1 = (float)(1.0 - pow((double)a.beta1, st));
        c2 = (float)sqrt(1.0 - pow((double)a.beta2, st));
    }
    const float step_size = a.lr / c1, decay = r.decay ? 1.0f - a.lr * a.weight_decay : 1.0f;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const float g = r.grad[i] * a.inv_grad_scale;
        const float p = r.param[i] * decay;
        const float mi = a.beta1 * r.m[i] + (1.0f - a.beta1) * g;
        const float vi = a.beta2 * r.v[i] + (1.0f - a.beta2) * g * g;
        r.m[i] = mi;
        r.v[i] = vi;
        const float np = p - step_size * mi / (sqrtf(vi) / c2 + a.eps);
        r.param[i] = np;
        if (r.half) tr_st_dt(r.half, i, r.half_dt, np);
    }
}

__global__ void sgd_kernel(const tr_k_param_ref *list, tr_k_sgd_args a)
{
    if (a.skip && *a.skip) return;
    const tr_k_param_ref r = list[blockIdx.y];
    const int64_t lo = (int64_t)blockIdx.x * OPT_CHUNK;
    const int64_t hi = lo + OPT_CHUNK < r.n ? lo + OPT_CHUNK : r.n;
    const float wd = r.decay ? a.weight_decay : 0.0f;
    int first = a.first_step;
    if (a.skipped) {
        /* the true step: the host's count less the skips it has not read yet */
        const int64_t st = a.step - ((int64_t)*a.skipped - a.skipped_known);
        first = st <= 1;
    }
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const float p = r.param[i];
        float g = r.grad[i] * a.inv_grad_scale + wd * p;
        if (a.momentum != 0.0f && r.m) {
            const float buf = first ? g : a.momentum * r.m[i] + (1.0f - a.dampening) * g;
            r.m[i] = buf;
            g = a.nesterov ? g + a.momentum * buf : buf;
        }
        const float np = p - a.lr * g;
        r.param[i] = np;
        if (r.half) tr_st_dt(r.half, i, r.half_dt, np);
    }
}

static int opt_check(const char *op, int64_t nparams, int64_t max_n, tr_error *err)
{
    if (nparams < 0 || nparams > 65535 || max_n < 0 || (max_n + OPT_CHUNK - 1) / OPT_CHUNK > 2147483647)
        return tr_fail(err, TR_EUSER, "%s on CUDA: %lld parameters (at most 65535 per launch) of up to %lld "
                                      "elements.", op, (long long)nparams, (long long)max_n);
    return TR_OK;
}

extern "C" int tr_k_adamw_cuda(const tr_k_param_ref *list, int64_t nparams, int64_t max_n,
                               const tr_k_adamw_args *args, void *stream, tr_error *err)
{
    int rc = opt_check("adamw", nparams, max_n, err);
    if (rc || nparams == 0 || max_n == 0) return rc;
    dim3 grid((unsigned)((max_n + OPT_CHUNK - 1) / OPT_CHUNK), (unsigned)nparams);
    adamw_kernel<<<grid, OPT_THREADS, 0, (cudaStream_t)stream>>>(list, *args);
    return tr_cuda_launched("adamw", err);
}

extern "C" int tr_k_sgd_cuda(const tr_k_param_ref *list, int64_t nparams, int64_t max_n, const tr_k_sgd_args *args,
                             void *stream, tr_error *err)
{
    int rc = opt_check("sgd", nparams, max_n, err);
    if (rc || nparams == 0 || max_n == 0) return rc;
    dim3 grid((unsigned)((max_n + OPT_CHUNK - 1) / OPT_CHUNK), (unsigned)nparams);
    sgd_kernel<<<grid, OPT_THREADS, 0, (cudaStream_t)stream>>>(list, *args);
    return tr_cuda_launched("sgd", err);
}
