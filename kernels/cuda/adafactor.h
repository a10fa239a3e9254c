/* adafactor.h — the Adafactor kernel (adafactor.cu), the device twin of
 * kernels/cpu/sgd_adafactor.h; host launchers with C linkage and no CUDA types, under
 * launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_ADAFACTOR_H
#define TR_KERNELS_CUDA_ADAFACTOR_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

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
/* One transformers Adafactor step in place (kernels/cpu/sgd_adafactor.c's formula):
 * param, exp_avg (NULL: beta1 None), row [B*R] and col [B*C] (factored) or v [n] (row and
 * col NULL), all f32 (+= / updated), grad f32; half (NULL, or n elements of half_dt)
 * receives the new param. *lr_out (device f32, may be NULL) receives the learning rate
 * used (0 on a skipped step). A set skip flag leaves every tensor as it was. */
int tr_k_adafactor_cuda(float *param, float *exp_avg, float *row, float *col, float *v, void *half, int half_dt,
                        const float *grad, int64_t B, int64_t R, int64_t C, const tr_k_adafactor_args *args,
                        float *scratch, float *lr_out, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
