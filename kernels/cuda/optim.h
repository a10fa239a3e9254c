/* optim.h — the optimizer kernels (optim.cu): multi-tensor AdamW and SGD, and Adafactor, the
 * device twins of kernels/cpu/optim.h; host launchers with C linkage and no
 * CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_OPTIM_H
#define TR_KERNELS_CUDA_OPTIM_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* One parameter of a multi-tensor optimizer launch (device memory): the fp32 master,
 * its f32 gradient, the moments, and an optional half copy refreshed after the update. */
typedef struct tr_k_param_ref {
    float *param;
    const float *grad;
    float *m;                   /* AdamW first moment / SGD momentum buffer (may be NULL for SGD) */
    float *v;                   /* AdamW second moment (NULL for SGD) */
    void *half;                 /* NULL, or the bf16/f16 copy that the forward reads */
    int64_t n;
    int32_t half_dt;
    int32_t decay;              /* 1: apply weight decay */
} tr_k_param_ref;

typedef struct tr_k_adamw_args {
    float lr, beta1, beta2, eps, weight_decay;
    float bias_c1;              /* 1 - beta1^step, computed by the host in double as the CPU */
    float bias_c2_sqrt;         /* sqrt(1 - beta2^step), likewise */
    float inv_grad_scale;       /* 1 / the loss scale the gradients still carry (1: none) */
    const int32_t *skip;        /* device flag: nonzero skips the step (fp16 overflow); NULL = never */
    /* the device loss scale's skip count (NULL: bias_c1/bias_c2_sqrt as given): the step is
     * step - (*skipped - skipped_known) and the corrections come from it on the device, so
     * steps skipped since the host last read the count need no read */
    const int32_t *skipped;
    int64_t step, skipped_known;
} tr_k_adamw_args;

/* torch.optim.AdamW on every listed parameter in one launch (kernels/cpu/optim.h's
 * formula): g = grad * inv_grad_scale, p *= 1 - lr wd, m = b1 m + (1-b1) g,
 * v = b2 v + (1-b2) g^2, p -= lr / c1 * m / (sqrt(v) / c2_sqrt + eps); then the half copy,
 * when listed, is refreshed from p. max_n = the largest n in the list. */
int tr_k_adamw_cuda(const tr_k_param_ref *list, int64_t nparams, int64_t max_n, const tr_k_adamw_args *args,
                    void *stream, tr_error *err);

typedef struct tr_k_sgd_args {
    float lr, momentum, dampening, weight_decay;
    float inv_grad_scale;
    int32_t nesterov;
    int32_t first_step;         /* 1: the momentum buffer starts as the gradient (torch) */
    const int32_t *skip;        /* device flag: nonzero skips the step (fp16 overflow); NULL = never */
    /* the device loss scale's skip count (NULL: first_step as given): the step is
     * step - (*skipped - skipped_known) (at least 1), first_step is whether it is 1 */
    const int32_t *skipped;
    int64_t step, skipped_known;
} tr_k_sgd_args;

/* torch.optim.SGD (coupled weight decay, momentum, dampening, Nesterov); m is the
 * momentum buffer (NULL when momentum is 0). A set skip flag leaves every listed tensor
 * as it was. */
int tr_k_sgd_cuda(const tr_k_param_ref *list, int64_t nparams, int64_t max_n, const tr_k_sgd_args *args,
                  void *stream, tr_error *err);

typedef struct tr_k_adafactor_args {
    double rel;                 /* the step size before scale_parameter: lr, or the relative step */
    float eps1, eps2, clip_threshold, beta1, weight_decay;
    float beta2t;               /* 1 - t^decay_rate, computed by the host in double as the CPU */
    float grad_scale;           /* the loss scale the gradients still carry (1: none) */
    int32_t scale_parameter;
    const int32_t *skip;        /* device flag: nonzero skips the step (fp16 overflow); NULL = never */
    /* the device loss scale's skip count (NULL: rel and beta2t as given): t = step -
     * (*skipped - skipped_known) (at least 1), and beta2t = 1 - t^decay_rate and, with
     * relative_step, rel = min(warmup_init ? 1e-6 t : 1e-2, 1 / sqrt(t)) come from t on the
     * device, in double as the host computes them */
    const int32_t *skipped;
    int64_t step, skipped_known;
    double decay_rate;
    int32_t relative_step, warmup_init;
} tr_k_adafactor_args;

/* Scratch (f32 elements) of an Adafactor step over B matrices [R, C] (a vector: B = R = 1). */
int64_t tr_k_adafactor_scratch_cuda(int64_t B, int64_t R, int64_t C);
/* One transformers Adafactor step in place (kernels/cpu/optim.c's formula):
 * param, exp_avg (NULL: beta1 None), row [B*R] and col [B*C] (factored) or v [n] (row and
 * col NULL), all f32 (+= / updated), grad f32; half (NULL, or n elements of half_dt)
 * receives the new param. *lr_out (device f32, may be NULL) receives the learning rate
 * used (0 on a skipped step). A set skip flag leaves every tensor as it was. */
int tr_k_adafactor_cuda(float *param, float *exp_avg, float *row, float *col, float *v, void *half, int half_dt,
                        const float *grad, int64_t B, int64_t R, int64_t C, const tr_k_adafactor_args *args,
                        float *scratch, float *lr_out, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
