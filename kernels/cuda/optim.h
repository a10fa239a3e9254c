/* optim.h — the multi-tensor AdamW and SGD kernels (optim.cu), the device twins of
 * kernels/cpu/adamw.h and kernels/cpu/sgd_adafactor.h; host launchers with C linkage and no
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

/* torch.optim.AdamW on every listed parameter in one launch (kernels/cpu/adamw.h's
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

TR_K_END_DECLS

#endif
