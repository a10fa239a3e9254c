/* cpu_backend.c — the CPU backend of the op table: device TR_CPU, always present, a slot
 * for every op (tr_cpu_<op>, core/cpu_ops/<family>_cpu.c), each taking every call the op's
 * checks accept. */
#include "cpu_slot.h"

static int owns(int device)
{
    return device == TR_CPU;
}

const tr_op_backend tr_cpu_backend = {
    "cpu",
    owns,
    owns,
    {
#define TR_OP(n, args, scalars) [TR_OPID_##n] = {tr_cpu_##n, NULL},
#include "op_list.h"
#undef TR_OP
    },
};
