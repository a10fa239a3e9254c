/* optim.cu — the optimizers on the GPU as multi-tensor launches: one launch updates every
 * parameter of the list (grid: chunks of the largest parameter x parameters), reading the
 * fp32 gradient, updating the fp32 master and its moments in place, and refreshing the
 * half copy the forward reads when there is one. A device flag can skip the step (the
 * fp16 loss scaler found an inf), so no host round trip decides it.
 * The step number can come from the device loss scale's skip count too (AdamW's bias
 * corrections, SGD's first step), for the same reason.
 * Formulas: kernels/cpu/optim.c (AdamW, SGD), i.e. torch's. Adafactor below. */
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

/* ------------------------------------------------------------ adafactor */

/* Adafactor: transformers' Adafactor step on the GPU, the formula of
 * kernels/cpu/optim.c (tr_k_adafactor_step) in the same order of operations:
 *   1. with scale_parameter, the RMS of the parameter before the update;
 *   2. the second moments: factored (row and column means of g^2 + eps1 over B matrices
 *      [R, C]) or a full v;
 *   3. the RMS of the update u, for the clip;
 *   4. one thread turns the sums into the learning rate and the clip's denominator, kept in
 *      device memory, so the update never waits for the host;
 *   5. the update: exp_avg, weight decay, param -= u, and the half copy from the new param.
 * Sums that the CPU takes in double are taken in double here too, each in a fixed tree
 * (a fixed grid of blocks, then one block over their partials): a step repeats bit for
 * bit. No atomics. A device flag (the fp16 loss scaler's found-inf) can skip the step: every
 * kernel reads it and returns, so nothing changes and no host round trip decides it; the
 * step number, on which beta2 and the relative step size depend, can likewise come from the
 * device loss scale's skip count. */
enum { AF_THREADS = 256, AF_PARTS = 256 };

/* Scratch layout (f32 slots): rf [B*R] | cf [B*C] | partials (2 * AF_PARTS doubles) | scalars. */
extern "C" int64_t tr_k_adafactor_scratch_cuda(int64_t B, int64_t R, int64_t C)
{
    return B * R + B * C + 4 * AF_PARTS + 16;
}

/* Whether the step is skipped (the same answer in every thread: nothing here writes it). */
__device__ __forceinline__ bool af_skip(const tr_k_adafactor_args &a) { return a.skip && *a.skip != 0; }

/* The step's beta2t and relative step size: as the host computed them, or, with the skip
 * count, from the step less the skips the host has not read yet, in the host's double
 * arithmetic (core/cuda_ops/optim_cuda.c; kernels/cpu/optim.c). */
__device__ __forceinline__ void af_step_terms(const tr_k_adafactor_args &a, float *beta2t, double *rel)
{
    *beta2t = a.beta2t;
    *rel = a.rel;
    if (!a.skipped) return;
    const int64_t st = a.step - ((int64_t)*a.skipped - a.skipped_known);
    const double t = (double)(st < 1 ? 1 : st);
    *beta2t = (float)(1 - pow(t, a.decay_rate));
    if (a.relative_step) *rel = fmin(a.warmup_init ? 1e-6 * t : 1e-2, 1 / sqrt(t));
}

/* Block sum of a double (blockDim.x == AF_THREADS), result in thread 0. */
static __device__ double af_block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = AF_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    const double r = sh[0];
    __syncthreads();
    return r;
}

/* The update before the clip and the learning rate, as the CPU computes it. */
__device__ __forceinline__ float af_u(const float *grad, const float *v, const float *rf, const float *cf, int64_t i,
                                      int64_t R, int64_t C, int factored, float inv_scale)
{
    const float gi = grad[i] * inv_scale;
    if (!factored) return (1.0f / sqrtf(v[i])) * gi;
    const int64_t row = i / C, b = row / R, j = i % C;
    return (rf[row] * cf[b * C + j]) * gi;
}

/* part[block] = this block's share of sum p^2 (what 0) or sum u^2 (what 1). */
__global__ void af_partial_kernel(double *part, const float *param, const float *grad, const float *v, const float *rf,
                                  const float *cf, int64_t n, int64_t R, int64_t C, int factored, float inv_scale,
                                  int what, tr_k_adafactor_args a)
{
    __shared__ double sh[AF_THREADS];
    if (af_skip(a)) return;
    double s = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double x = what == 0 ? (double)param[i] : (double)af_u(grad, v, rf, cf, i, R, C, factored, inv_scale);
        s += x * x;
    }
    s = af_block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* row[r] = beta2t row[r] + (1 - beta2t) mean_j (g^2 + eps1): one block per row of C. */
__global__ void af_rows_kernel(float *row, const float *grad, int64_t C, float inv_scale, tr_k_adafactor_args a)
{
    __shared__ double sh[AF_THREADS];
    if (af_skip(a)) return;
    float beta2t;
    double rel;
    af_step_terms(a, &beta2t, &rel);
    const float eps1 = a.eps1;
    const int64_t r = blockIdx.x;
    double s = 0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
        const float gi = grad[r * C + j] * inv_scale;
        s += (double)(gi * gi + eps1);
    }
    s = af_block_sum(s, sh);
    if (threadIdx.x == 0) row[r] = beta2t * row[r] + (1.0f - beta2t) * (float)(s / (double)C);
}

/* col[b, j] likewise over the R rows (one thread per column, rows in order); cf = 1/sqrt(col). */
__global__ void af_cols_kernel(float *col, float *cf, const float *grad, int64_t B, int64_t R, int64_t C,
                               float inv_scale, tr_k_adafactor_args a)
{
    if (af_skip(a)) return;
    float beta2t;
    double rel;
    af_step_terms(a, &beta2t, &rel);
    const float eps1 = a.eps1;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < B * C; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = t / C, j = t % C;
        const float *g = grad + b * R * C;
        double s = 0;
        for (int64_t r = 0; r < R; r++) {
            const float gi = g[r * C + j] * inv_scale;
            s += (double)(gi * gi + eps1);
        }
        const float c = beta2t * col[t] + (1.0f - beta2t) * (float)(s / (double)R);
        col[t] = c;
        cf[t] = 1.0f / sqrtf(c);
    }
}

/* rf[b, r] = 1 / sqrt(row[b, r] / mean_r row[b, :]): one block per matrix. */
__global__ void af_rowfac_kernel(float *rf, const float *row, int64_t R, tr_k_adafactor_args a)
{
    __shared__ double sh[AF_THREADS];
    if (af_skip(a)) return;
    const int64_t b = blockIdx.x;
    double s = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) s += (double)row[b * R + r];
    s = af_block_sum(s, sh);
    const float rmean = (float)(s / (double)R);
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) rf[b * R + r] = 1.0f / sqrtf(row[b * R + r] / rmean);
}

__global__ void af_v_kernel(float *v, const float *grad, int64_t n, float inv_scale, tr_k_adafactor_args a)
{
    if (af_skip(a)) return;
    float beta2t;
    double rel;
    af_step_terms(a, &beta2t, &rel);
    const float eps1 = a.eps1;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float gi = grad[i] * inv_scale;
        v[i] = beta2t * v[i] + (1.0f - beta2t) * (gi * gi + eps1);
    }
}

/* One block: the two sums, then scal[0] = lr (f32 as the update uses it), scal[1] = the
 * clip's denominator, scal[2] = -weight_decay * lr; *lr_out = lr when asked (0 when the
 * step is skipped: no learning rate was applied). */
__global__ void af_scalars_kernel(float *scal, float *lr_out, const double *part, int64_t n, tr_k_adafactor_args a)
{
    __shared__ double sh[AF_THREADS];
    if (af_skip(a)) {
        if (threadIdx.x == 0 && lr_out) *lr_out = 0.0f;
        return;
    }
    float beta2t;
    double rel;
    af_step_terms(a, &beta2t, &rel);
    double ss = 0, uu = 0;
    for (int i = threadIdx.x; i < AF_PARTS; i += blockDim.x) ss += part[i], uu += part[AF_PARTS + i];
    ss = af_block_sum(ss, sh);
    uu = af_block_sum(uu, sh);
    if (threadIdx.x != 0) return;
    double lr = rel;
    if (a.scale_parameter) lr = fmax((double)a.eps2, sqrt(ss / (double)n)) * rel;
    const double clip = sqrt(uu / (double)n) / (double)a.clip_threshold;
    scal[0] = (float)lr;
    scal[1] = (float)(clip > 1 ? clip : 1);
    scal[2] = (float)(-(double)a.weight_decay * lr);
    if (lr_out) *lr_out = (float)lr;
}

/* param -= the clipped, scaled update; the half copy, when given, receives the new param. */
__global__ void af_update_kernel(float *param, float *exp_avg, void *half, int half_dt, const float *grad,
                                 const float *v, const float *rf, const float *cf, const float *scal, int64_t n,
                                 int64_t R, int64_t C, int factored, float inv_scale, tr_k_adafactor_args a)
{
    if (af_skip(a)) return;
    const float beta1 = a.beta1, weight_decay = a.weight_decay;
    const float lr = scal[0], denom = scal[1], decay = scal[2];
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float u = af_u(grad, v, rf, cf, i, R, C, factored, inv_scale);
        u = u / denom * lr;
        if (exp_avg) u = exp_avg[i] = beta1 * exp_avg[i] + (1.0f - beta1) * u;
        float p = param[i];
        if (weight_decay != 0.0f) p = p + decay * p;
        const float np = p - u;
        param[i] = np;
        if (half) tr_st_dt(half, i, half_dt, np);
    }
}

extern "C" int tr_k_adafactor_cuda(float *param, float *exp_avg, float *row, float *col, float *v, void *half,
                                   int half_dt, const float *grad, int64_t B, int64_t R, int64_t C,
                                   const tr_k_adafactor_args *args, float *scratch, float *lr_out, void *stream,
                                   tr_error *err)
{
    const char *op = "adafactor";
    const int factored = row != NULL;
    const int64_t n = B * R * C;
    if (B < 0 || R < 0 || C < 0 || (factored && (!col || (B * R > 2147483647) || B > 2147483647)) || (!factored && !v))
        return tr_fail(err, TR_EUSER, "%s on CUDA: bad shape %lld x %lld x %lld or missing state.", op, (long long)B,
                       (long long)R, (long long)C);
    if (n == 0) return TR_OK;
    cudaStream_t s = (cudaStream_t)stream;
    float *rf = scratch, *cf = scratch + B * R;
    /* the partials are doubles: align them to 8 bytes after the two f32 arrays */
    int64_t off = B * R + B * C;
    off += off & 1;
    double *part = (double *)(scratch + off);
    float *scal = scratch + off + 4 * AF_PARTS;
    const float inv = 1.0f / args->grad_scale;
    const tr_k_adafactor_args a = *args;
    int rc;
    if (args->scale_parameter) {
        af_partial_kernel<<<AF_PARTS, AF_THREADS, 0, s>>>(part, param, grad, v, rf, cf, n, R, C, factored, inv, 0, a);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    } else {
        TR_CUDA_CHECK(err, cudaMemsetAsync(part, 0, AF_PARTS * sizeof(double), s));
    }
    if (factored) {
        af_rows_kernel<<<(unsigned)(B * R), AF_THREADS, 0, s>>>(row, grad, C, inv, a);
        if ((rc = tr_cuda_launched(op, err))) return rc;
        af_cols_kernel<<<tr_cuda_grid(B * C, AF_THREADS), AF_THREADS, 0, s>>>(col, cf, grad, B, R, C, inv, a);
        if ((rc = tr_cuda_launched(op, err))) return rc;
        af_rowfac_kernel<<<(unsigned)B, AF_THREADS, 0, s>>>(rf, row, R, a);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    } else {
        af_v_kernel<<<tr_cuda_grid(n, AF_THREADS), AF_THREADS, 0, s>>>(v, grad, n, inv, a);
        if ((rc = tr_cuda_launched(op, err))) return rc;
    }
    af_partial_kernel<<<AF_PARTS, AF_THREADS, 0, s>>>(part + AF_PARTS, param, grad, v, rf, cf, n, R, C, factored, inv,
                                                      1, a);
    if ((rc = tr_cuda_launched(op, err))) return rc;
    af_scalars_kernel<<<1, AF_THREADS, 0, s>>>(scal, lr_out, part, n, a);
    if ((rc = tr_cuda_launched(op, err))) return rc;
    af_update_kernel<<<tr_cuda_grid(n, AF_THREADS), AF_THREADS, 0, s>>>(param, exp_avg, half, half_dt, grad, v, rf, cf,
                                                                        scal, n, R, C, factored, inv, a);
    return tr_cuda_launched(op, err);
}
