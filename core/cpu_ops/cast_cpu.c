/* cast_cpu.c — the CPU slots (checks and wrappers: core/ops/cast.c): tensor-level dtype casts between any two of the
 * five dtypes, through tr_convert (core/tensor/tensor.h: round-to-nearest-even, integers by value) in parallel chunks.
 */
#include "ops_cast.h"
#include "cpu_slot.h"

static int cast_run(tr_ctx *ctx, const tr_tensor *out, const tr_tensor *in)
{
    tr_stage_convert(out->data, out->dtype, in->data, in->dtype, (size_t)in->numel);
    return TR_OK;
}

/* ------------------------------------------------------------ the slots */

TR_CPU_SLOT_BY(cast, cast_run, c->cast.out, c->cast.in)
