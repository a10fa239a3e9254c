/* cast_cuda.c — the CUDA slot of cast (CPU slot: core/cpu_ops/cast_cpu.c): any two of the five
 * dtypes, with core/tensor/convert.c's rules (RNE to the halves; integers by value,
 * float -> integer truncating, saturating, NaN -> 0). */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

TR_CSLOT_DEFINE(cast)
static int cast_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->cast.out, *in = c->cast.in;
    return tr_k_cast_any_cuda(out->data, out->dtype, in->data, in->dtype, in->numel, s->stream, s->err);
}

#endif
