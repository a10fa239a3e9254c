/* attn_isa.h — what the attention kernel tests (test_attention.c, test_attn_tile.c) share:
 * whether this CPU runs the kernels of an ISA, printing the running case's SKIP line (named
 * CASE.NAME) for one it lacks. */
#ifndef TR_TEST_ATTN_ISA_H
#define TR_TEST_ATTN_ISA_H

#include <stdio.h>

#include "check.h"
#include "cpu/attn_tile.h"

static inline int attn_isa_runs(int isa, const char *name)
{
    if (tr_attn_tile_usable(isa)) return 1;
    printf("SKIP %s.%s: this CPU lacks it\n", check_case_name, name);
    return 0;
}

#endif
