/* adamw.h — CPU fused AdamW step (torch.optim.AdamW semantics), _f32 and _f64. Updates
 * param, m and v in place; grad is read only. */
#ifndef TR_KERNELS_CPU_ADAMW_H
#define TR_KERNELS_CPU_ADAMW_H

#include <stdint.h>

void tr_k_adamw_step_f32(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t step, float grad_scale);
void tr_k_adamw_step_f64(double *param, double *m, double *v, const double *grad, int64_t n, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int64_t step,
                    double grad_scale);

#endif
