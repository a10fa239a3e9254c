/* elementwise_cuda.c — the CUDA slots of add, mul, mul_backward, scale, axpy and fill
 * (CPU slots: core/cpu_ops/elementwise_cpu.c). Every tensor keeps its own dtype; b broadcasts
 * over a's rows when it is a vector of a's last dimension (the check allowed nothing else). */
#ifdef TR_HAVE_CUDA

#include "cuda_slot.h"

/* N rows of C and whether b is broadcast, from a and b as the shape check left them. */
static int broadcast_of(const tr_tensor *a, const tr_tensor *b, int64_t *N, int64_t *C)
{
    tr_op_rows(a, N, C);
    return b->numel != a->numel;
}

static int binary(tr_cslot *s, tr_op_call *c, int is_mul)
{
    const tr_tensor *out = c->add.out, *a = c->add.a, *b = c->add.b; /* mul: the same arguments */
    int64_t N, C;
    int bc = broadcast_of(a, b, &N, &C);
    return tr_k_binary_bcast_cuda(out->data, out->dtype, a->data, a->dtype, b->data, b->dtype, N, C, bc, is_mul,
                                  s->stream, s->err);
}

TR_CSLOT_BY(add, binary, c, 0)
TR_CSLOT_BY(mul, binary, c, 1)

/* da (=) = dout * b; db (=) = dout * a, summed over rows when b was broadcast. */
TR_CSLOT_DEFINE(mul_backward)
static int mul_backward_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *da = c->mul_backward.da, *db = c->mul_backward.db, *dout = c->mul_backward.dout,
                    *a = c->mul_backward.a, *b = c->mul_backward.b;
    int64_t N, C;
    int bc = broadcast_of(a, b, &N, &C);
    return tr_k_mul_bwd_cuda(da ? da->data : NULL, da ? da->dtype : TR_F32, db ? db->data : NULL,
                             db ? db->dtype : TR_F32, dout->data, dout->dtype, a->data, a->dtype, b->data, b->dtype, N,
                             C, bc, s->stream, s->err);
}

TR_CSLOT_DEFINE(scale)
static int scale_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->scale.out, *x = c->scale.x;
    return tr_k_scale_mixed_cuda(out->data, out->dtype, x->data, x->dtype, c->f[0], x->numel, 0, s->stream, s->err);
}

/* y (+=) += alpha * x */
TR_CSLOT_DEFINE(axpy)
static int axpy_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *y = c->axpy.y, *x = c->axpy.x;
    return tr_k_scale_mixed_cuda(y->data, y->dtype, x->data, x->dtype, c->f[0], x->numel, 1, s->stream, s->err);
}

TR_CSLOT_DEFINE(fill)
static int fill_body(tr_cslot *s, tr_op_call *c)
{
    const tr_tensor *out = c->fill.out;
    return tr_k_fill_fwd_cuda(out->data, c->f[0], out->dtype, out->numel, s->stream, s->err);
}

#endif
