/* dropout_cuda.c — the CUDA slots of dropout and dropout_backward (CPU slots:
 * core/cpu_ops/dropout_cpu.c). The keep bits are core/base/rng.h's for the same key and stream
 * offset (kernels/cuda/dropout.cu draws the same Philox words), so the GPU's mask equals
 * the CPU's bit for bit and the backward regenerates it; nothing is stored. */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"
#include "rng.h"

/* out = in * keep / (1 - p) with the forward's key and offset (the backward is the same on dout) */
static int apply(tr_cslot *s, tr_op_call *c)
{
    /* dropout_backward's dx and dout sit where dropout's out and x do */
    const tr_tensor *out = c->dropout.out, *in = c->dropout.x;
    const float p = c->f[0];
    const tr_rng_key key = c->p ? *(const tr_rng_key *)c->p : (tr_rng_key){0, 0, 0, 0};
    return tr_k_dropout_cuda(out->data, out->dtype, in->data, in->dtype, in->numel, p, key.seed, key.step, key.layer,
                             key.op, c->u, s->stream, s->err);
}

TR_CSLOT_BY(dropout, apply, c)
TR_CSLOT_BY(dropout_backward, apply, c)

#endif
