/* multi_tensor_args.h — how tr_op_adamw_multi's lists travel in a tr_op_call (call->p), for
 * its CPU slot (core/ops/multi_tensor.c) and its CUDA slot (core/cuda_ops/
 * multi_tensor_cuda.c). Internal to core/. */
#ifndef TR_MULTI_TENSOR_ARGS_H
#define TR_MULTI_TENSOR_ARGS_H

#include "tensor.h"

typedef struct tr_adamw_lists {
    tr_tensor **params, **grads, **m, **v;
    tr_tensor **half;     /* NULL, or n entries that may be NULL */
    const int32_t *decay; /* NULL: every parameter decays */
} tr_adamw_lists;

#endif
