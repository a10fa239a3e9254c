/* optim.h — CPU fused optimizer steps (optim.c): AdamW (torch.optim.AdamW), SGD
 * (torch.optim.SGD) and Adafactor (transformers' Adafactor), _f32 and _f64. Each updates the parameter and its optimizer state in
 * place; grad is read only. No allocation: scratch arrays come from the caller. */
#ifndef TR_KERNELS_CPU_OPTIM_H
#define TR_KERNELS_CPU_OPTIM_H

#include <stdint.h>

/* AdamW: updates param, m and v in place; grad is read only. */
void tr_k_adamw_step_f32(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t step, float grad_scale);
void tr_k_adamw_step_f64(double *param, double *m, double *v, const double *grad, int64_t n, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int64_t step,
                    double grad_scale);

/* Adafactor's hyper-parameters (transformers.optimization.Adafactor's arguments), shared
 * by both instantiations. beta1 is read only when the caller passes a first moment. */
typedef struct adafactor_hparams {
    double lr;              /* used when relative_step is 0 */
    double eps1, eps2;      /* regulariser of g^2 (1e-30), floor of the parameter RMS (1e-3) */
    double clip_threshold;  /* the update's RMS is clipped to this (1.0) */
    double decay_rate;      /* beta2 at step t is 1 - t^decay_rate (-0.8) */
    double beta1;           /* first-moment decay */
    double weight_decay;
    int relative_step, scale_parameter, warmup_init;
    int64_t step;           /* counts from 1 */
    double grad_scale;      /* the gradients are divided by it (1 when unscaled) */
} adafactor_hparams;

void tr_k_sgd_step_f32(float *param, float *momentum_buf, const float *grad, int64_t n, float lr, float momentum,
                  float dampening, float weight_decay, int nesterov, int first_step, float grad_scale);
void tr_k_sgd_step_f64(double *param, double *momentum_buf, const double *grad, int64_t n, double lr, double momentum,
                  double dampening, double weight_decay, int nesterov, int first_step, double grad_scale);

double tr_k_adafactor_step_f32(float *param, float *exp_avg, float *row, float *col, float *v, double *work,
                          const float *grad, int64_t B, int64_t R, int64_t C, const adafactor_hparams *hp);
double tr_k_adafactor_step_f64(double *param, double *exp_avg, double *row, double *col, double *v, double *work,
                          const double *grad, int64_t B, int64_t R, int64_t C, const adafactor_hparams *hp);

#endif
