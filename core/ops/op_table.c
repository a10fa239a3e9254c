/* op_table.c — the op table, its dispatcher and the argument checks every op shares (see
 * op_table.h for the contract). The descriptions live beside their wrappers in
 * core/ops/ (one file per family); op_list.h names them all once; backend_list.h names
 * the backends whose slot tables the dispatcher looks in. */
#include "op_table.h"

#include "tensor_version.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ the table */

/* An op has an infer step when its family's file defines tr_infer_<op> (a weak reference:
 * NULL otherwise). */
#define TR_OP(n, args, scalars)                                                                                        \
    int tr_infer_##n(tr_ctx *ctx, const tr_op_call *call, int64_t shape[][8], int *ndim, int *dtype)                   \
        __attribute__((weak));
#include "op_list.h"
#undef TR_OP

/* The descriptions, one per line of op_list.h: a pass that counts each op's arguments,
 * then one that writes them out. */
enum {
#define TR_A(n, role, rule, nullable) +1
#define TR_S(n, slot, index, dflt)    +1
#define TR_OP(n, args, scalars)       TR_NARGS_##n = 0 args, TR_NSCALARS_##n = 0 scalars,
#include "op_list.h"
#undef TR_OP
#undef TR_S
#undef TR_A
};

#define TR_A(n, role, rule, nullable) {#n, TR_ARG_##role, TR_DT_##rule, nullable},
#define TR_SLOT_f                     'f'
#define TR_SLOT_i                     'i'
#define TR_S(n, slot, index, dflt)    {#n, TR_SLOT_##slot, index, dflt},
#define TR_OP(n, args, scalars)                                                                                        \
    const tr_op_desc tr_opd_##n = {#n,           TR_NARGS_##n, {args},          tr_check_##n,                          \
                                   tr_infer_##n, TR_OPID_##n,  TR_NSCALARS_##n, {scalars}};
#include "op_list.h"
#undef TR_OP
#undef TR_S
#undef TR_A

static const tr_op_desc *const table[] = {
#define TR_OP(n, args, scalars) &tr_opd_##n,
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

/* ------------------------------------------------------------ the backends */

#define TR_BACKEND(n) extern const tr_op_backend tr_##n##_backend;
#include "backend_list.h"
#undef TR_BACKEND

static const tr_op_backend *const backends[] = {
#define TR_BACKEND(n) &tr_##n##_backend,
#include "backend_list.h"
#undef TR_BACKEND
};

enum { N_BACKENDS = (int)(sizeof backends / sizeof backends[0]) };

const tr_op_backend *tr_op_backend_of(int device)
{
    for (int i = 0; i < N_BACKENDS; i++)
        if (backends[i]->owns(device)) return backends[i];
    return NULL;
}

const tr_op_slot *tr_op_slot_of(const tr_op_desc *op, int device)
{
    const tr_op_backend *b = tr_op_backend_of(device);
    if (!b || !op || op->id < 0 || op->id >= TR_OP_COUNT || !b->slots[op->id].run) return NULL;
    return &b->slots[op->id];
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
    return tr_op_slot_of(tr_op_find(op), device) != NULL;
}

int tr_op_supported(const char *op, int device)
{
    return tr_op_built(op, device) && tr_op_backend_of(device)->present(device);
}

/* ------------------------------------------------------------ for bindings */

int tr_op_arg_info(int i, int a, const char **name, int *role, int *rule, int *nullable)
{
    const tr_op_desc *d = tr_op_at(i);
    if (!d || a < 0 || a >= d->nargs) return 0;
    *name = d->args[a].name;
    *role = d->args[a].role;
    *rule = d->args[a].dtype;
    *nullable = d->args[a].nullable;
    return 1;
}

int tr_op_scalar_info(int i, int s, const char **name, int *slot, int *index, double *dflt)
{
    const tr_op_desc *d = tr_op_at(i);
    if (!d || s < 0 || s >= d->nscalars) return 0;
    *name = d->scalars[s].name;
    *slot = d->scalars[s].slot;
    *index = d->scalars[s].index;
    *dflt = d->scalars[s].dflt;
    return 1;
}

int tr_op_has_infer(int i)
{
    const tr_op_desc *d = tr_op_at(i);
    return d && d->infer;
}

/* A call of op d from a binding's arrays: d->nargs tensors, every scalar slot. */
static tr_op_call call_of(const tr_op_desc *d, tr_tensor *const *t, const float *f, const int64_t *ints)
{
    tr_op_call c = {.t = {0}};
    for (int a = 0; a < d->nargs; a++) c.t[a] = t[a];
    for (int k = 0; k < TR_OP_MAX_SCALARS; k++) c.f[k] = f[k];
    for (int k = 0; k < TR_OP_MAX_INTS; k++) c.i[k] = ints[k];
    return c;
}

int tr_op_infer(tr_ctx *ctx, int i, tr_tensor *const *t, const float *f, const int64_t *ints, int64_t *shapes,
                int *ndims, int *dtypes)
{
    const tr_op_desc *d = tr_op_at(i);
    if (!d || !d->infer)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "tr_op_infer: op %d (%s) has no infer step", i,
                       d ? d->name : "not in the table");
    tr_op_call c = call_of(d, t, f, ints);
    /* the dispatcher's first rule, for the arguments the outputs are inferred from */
    for (int a = 0; a < d->nargs; a++)
        if (d->args[a].role != TR_ARG_OUT && !c.t[a] && !d->args[a].nullable)
            return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %s is NULL; pass a tensor", d->name, d->args[a].name);
    return d->infer(ctx, &c, (int64_t(*)[8])shapes, ndims, dtypes);
}

int tr_op_invoke(tr_ctx *ctx, int i, tr_tensor *const *t, const float *f, const int64_t *ints)
{
    const tr_op_desc *d = tr_op_at(i);
    if (!d) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "tr_op_invoke: op %d is not in the table", i);
    tr_op_call c = call_of(d, t, f, ints);
    return tr_op_run(ctx, d, &c);
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
    const tr_op_slot *slot = tr_op_slot_of(op, call->device);
    if (!slot) return tr_op_fail_not_built(ctx, op->name, call->device);
    if (slot->supports && !slot->supports(call)) return tr_op_fail_unsupported(ctx, op, call);
    rc = slot->run(ctx, call);
    /* Every output and in-place argument may have changed (a failed slot may have written
     * part of one): their versions move, so that a copy derived from them (a packed
     * weight) is rebuilt. A list's tensors are updated in place by the multi-tensor ops. */
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].role != TR_ARG_IN && call->t[i]) tr_tensor_mark_written(call->t[i]);
    for (int i = 0; call->list && i < call->nlist; i++)
        if (call->list[i]) tr_tensor_mark_written(call->list[i]);
    return rc;
}
