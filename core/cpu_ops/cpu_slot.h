/* cpu_slot.h — what the CPU slots of the op table (core/cpu_ops/, one file per family)
 * share: their names, tr_cpu_<op> (one per op of op_list.h, gathered into the CPU backend's
 * table by cpu_backend.c), and the staging loop (stage_rows.h) that runs a slot's f32 kernel
 * over tensors of any float dtype. A slot runs after the op table's checks (op_table.c: NULL
 * rules, one device, dtype rules, the op's shape check and the sizes it left in call->dim),
 * so it only computes. Internal to core/. */
#ifndef TR_CPU_SLOT_H
#define TR_CPU_SLOT_H

#include "op_stage.h"
#include "op_table.h"
#include "stage_rows.h"

#define TR_OP(n, args, scalars) int tr_cpu_##n(tr_ctx *ctx, tr_op_call *call);
#include "op_list.h"
#undef TR_OP

/* Defines the slot tr_cpu_<name> as a call of fn(ctx, ...), the macro's tail being
 * expressions over the call `c`. */
#define TR_CPU_SLOT_BY(name, fn, ...)                                                                                  \
    int tr_cpu_##name(tr_ctx *ctx, tr_op_call *c)                                                                      \
    {                                                                                                                  \
        return fn(ctx, __VA_ARGS__);                                                                                   \
    }

#endif
