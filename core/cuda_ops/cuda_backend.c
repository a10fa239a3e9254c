/* cuda_backend.c — the CUDA backend of the op table: devices 0 .. N-1 (present when the
 * driver sees them), a slot for every op (tr_opc_<op>, core/cuda_ops/<family>_cuda.c).
 * Compiled only with TR_HAVE_CUDA; without it no backend owns a CUDA device and the
 * dispatcher gives its one "not built" error. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "cuda_card.h"
#include "cuda_device.h"

static int owns(int device)
{
    return device >= 0;
}

static int present(int device)
{
    return device >= 0 && device < tr_cuda_device_count();
}

/* bf16 arithmetic on CUDA needs an sm_80 card: cuBLASLt has no bf16 products before Ampere, nor
 * do the tensor cores. On an older card every call with a bf16 tensor is declined (the
 * dispatcher's "cannot run these arguments"); a run asks for precision = "fp16" there before
 * it starts (lua/trainer/core/card.lua). */
static int card_takes(const tr_op_call *call)
{
    int bf16 = 0;
    for (int i = 0; i < TR_OP_MAX_TENSORS && !bf16; i++) bf16 = call->t[i] && call->t[i]->dtype == TR_BF16;
    for (int i = 0; call->list && i < call->nlist && !bf16; i++) bf16 = call->list[i] && call->list[i]->dtype == TR_BF16;
    return !bf16 || tr_cuda_card_cc(call->device) >= 80;
}

const tr_op_backend tr_cuda_backend = {
    "cuda",
    owns,
    present,
    {
#define TR_OP(n, args, scalars) [TR_OPID_##n] = {tr_opc_##n, card_takes},
#include "op_list.h"
#undef TR_OP
    },
};

#endif
