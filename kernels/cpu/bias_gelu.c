/* bias_gelu.c — instantiates bias_gelu_impl.h for float (the runtime) and double (the
 * tests' reference); the GELU itself is gelu.c's (vectorised for float). */
#include "cpu/bias_gelu.h"
#include "cpu/gelu.h"
#include "cpu/fast_math.h"

#include <stdint.h>

/* Rows per block: a block is at most BG_BLOCK elements (one of gelu.c's spans stays under
 * its parallel threshold, so a block runs on the thread that took it), at least one row. */
enum { BG_BLOCK = 32768 };

static int64_t bg_rows(int64_t I) { return I > 0 && I < BG_BLOCK ? BG_BLOCK / I : 1; }

int64_t tr_k_bias_gelu_bwd_scratch(int64_t N, int64_t I)
{
    int64_t rows = bg_rows(I);
    return ((N + rows - 1) / rows) * I;
}

#define KERNEL_IMPL "cpu/bias_gelu_impl.h"
#include "cpu/instantiate.h"
