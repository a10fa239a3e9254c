/* cuda_backend.c — the CUDA backend of the op table: devices 0 .. N-1 (present when the
 * driver sees them), a slot for every op (tr_opc_<op>, core/cuda_ops/<family>_cuda.c).
 * Compiled only with TR_HAVE_CUDA; without it no backend owns a CUDA device and the
 * dispatcher gives its one "not built" error. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "cuda_device.h"

static int owns(int device)
{
    return device >= 0;
}

static int present(int device)
{
    return device >= 0 && device < tr_cuda_device_count();
}

const tr_op_backend tr_cuda_backend = {
    "cuda",
    owns,
    present,
    {
#define TR_OP(n, args, scalars) [TR_OPID_##n] = {tr_opc_##n, NULL},
#include "op_list.h"
#undef TR_OP
    },
};

#endif
