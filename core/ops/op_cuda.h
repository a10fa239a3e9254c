/* op_cuda.h — the CUDA slots of the op table: one function per op, tr_opc_<op>, in
 * core/cuda_ops/<family>_cuda.c, declared here from op_list.h. A description names its
 * slot as TR_CUDA_SLOT(op): the function in a build with the CUDA backend (TR_HAVE_CUDA),
 * NULL in one without, where the dispatcher gives its one "not built" error
 * (core/ops/op_errors.c). Internal to core/. */
#ifndef TR_OP_CUDA_H
#define TR_OP_CUDA_H

#include "op_table.h"

#ifdef TR_HAVE_CUDA
#define TR_OP(n) int tr_opc_##n(tr_ctx *ctx, tr_op_call *call);
#include "op_list.h"
#undef TR_OP
#define TR_CUDA_SLOT(n) tr_opc_##n
#else
#define TR_CUDA_SLOT(n) NULL
#endif

#endif
