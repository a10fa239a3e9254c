/* op_table.c — the op table, its dispatcher and the argument checks every op shares (see
 * op_table.h for the contract). The descriptions live beside their wrappers in
 * core/ops/ (one file per family); op_list.h names them all once. */
#include "op_table.h"

#include "cuda_device.h"
#include "tensor_version.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ the table */

#define TR_OP(n) extern const tr_op_desc tr_opd_##n;
#include "op_list.h"
#undef TR_OP

static const tr_op_desc *const table[] = {
#define TR_OP(n) &tr_opd_##n,
#include "op_list.h"
#undef TR_OP
};

enum { N_OPS = (int)(sizeof table / sizeof table[0]) };

const tr_op_desc *tr_op_at(int i) { return i >= 0 && i < N_OPS ? table[i] : NULL; }

const tr_op_desc *tr_op_find(const char *name)
{
    for (int i = 0; name && i < N_OPS; i++)
        if (strcmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}

int tr_op_count(void) { return N_OPS; }

const char *tr_op_name(int i) { return i >= 0 && i < N_OPS ? table[i]->name : NULL; }

static int slot_of(int device) { return device == TR_CPU ? TR_SLOT_CPU : TR_SLOT_CUDA; }

static int device_present(int device)
{
    return device == TR_CPU || (device >= 0 && device < tr_cuda_device_count());
}

int tr_cuda_built(void)
{
#ifdef TR_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int tr_op_built(const char *op, int device)
{
    const tr_op_desc *d = tr_op_find(op);
    if (!d || (device != TR_CPU && device < 0)) return 0;
    return d->slot[slot_of(device)] != NULL;
}

int tr_op_supported(const char *op, int device)
{
    const tr_op_desc *d = tr_op_find(op);
    if (!d || (device != TR_CPU && device < 0)) return 0;
    return d->slot[slot_of(device)] != NULL && device_present(device);
}

/* ------------------------------------------------------------ the dispatcher */

static int is_float(int dt) { return dt == TR_F32 || dt == TR_BF16 || dt == TR_F16; }

static int dtype_ok(int rule, int dt)
{
    switch (rule) {
    case TR_DT_FLOAT: return is_float(dt);
    case TR_DT_F32: return dt == TR_F32;
    case TR_DT_INDEX: return dt == TR_I32 || dt == TR_I64;
    case TR_DT_MASK: return is_float(dt) || dt == TR_I32 || dt == TR_I64;
    case TR_DT_HALF: return dt == TR_BF16 || dt == TR_F16;
    default: return 1;
    }
}

static const char *const rule_text[] = {
    [TR_DT_FLOAT] = "a floating dtype (f32, bf16 or f16); cast it first",
    [TR_DT_F32] = "f32 (parameter gradients, saved statistics and optimizer state are kept in f32 even in "
                  "mixed precision)",
    [TR_DT_INDEX] = "i32 or i64 (integer ids)",
    [TR_DT_MASK] = "i32, i64 or a floating dtype (nonzero = keep)",
    [TR_DT_HALF] = "bf16 or f16 (the half copy of a weight)",
    [TR_DT_ANY] = "any dtype",
};

int tr_op_run(tr_ctx *ctx, const tr_op_desc *op, tr_op_call *call)
{
    tr_error *err = tr_ctx_err(ctx);
    int first = -1;
    for (int i = 0; i < op->nargs; i++) {
        const tr_op_arg *a = &op->args[i];
        const tr_tensor *t = call->t[i];
        if (!t) {
            if (a->nullable) continue;
            return tr_fail(err, TR_EUSER, "%s: %s is NULL; pass a tensor", op->name, a->name);
        }
        if (first < 0) first = i;
        else if (t->device != call->t[first]->device) {
            char d1[32], d2[32];
            tr_op_device_name(d1, sizeof d1, t->device);
            tr_op_device_name(d2, sizeof d2, call->t[first]->device);
            return tr_fail(err, TR_EUSER, "%s: %s is on %s but %s is on %s; move every tensor of one op to one device",
                           op->name, a->name, d1, op->args[first].name, d2);
        }
        if (!dtype_ok(a->dtype, t->dtype))
            return tr_fail(err, TR_EUSER, "%s: %s has dtype %s but must be %s", op->name, a->name,
                           tr_dtype_name(t->dtype), rule_text[a->dtype]);
    }
    /* ops whose tensors come as a list (global_norm) take the device from it */
    if (first >= 0) call->device = call->t[first]->device;
    else if (call->list && call->nlist > 0 && call->list[0]) call->device = call->list[0]->device;
    else call->device = TR_CPU;
    int rc = op->check ? op->check(ctx, call) : TR_OK;
    if (rc != TR_OK) return rc;
    if (call->device != TR_CPU && call->device < 0)
        return tr_fail(err, TR_EUSER, "%s: device %d is not a device (cpu is %d, cuda:N is N)", op->name,
                       call->device, TR_CPU);
    tr_op_fn fn = op->slot[slot_of(call->device)];
    if (!fn) return tr_op_fail_not_built(ctx, op->name, call->device);
    rc = fn(ctx, call);
    /* Every output and in-place argument may have changed (a failed slot may have written
     * part of one): their versions move, so that a copy derived from them (a packed
     * weight) is rebuilt. A list's tensors are updated in place by the multi-tensor ops. */
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].role != TR_ARG_IN && call->t[i]) tr_tensor_mark_written(call->t[i]);
    for (int i = 0; call->list && i < call->nlist; i++)
        if (call->list[i]) tr_tensor_mark_written(call->list[i]);
    return rc;
}
