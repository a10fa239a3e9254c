/* stage_rows.h — the one staging loop of the CPU slots: a row-wise op's kernel over f32
 * pointers, whatever the dtypes of its tensors. The slot says how each argument is laid out
 * against the op's N rows of C; the op's description says what the loop does with it (its
 * role: an IN argument is read, an OUT one written back, an ACC one read and written back).
 * Internal to core/.
 *
 *   TR_ROWS_BLOCK   [N, C]: rows r0 .. r0 + nr of each block, f32 in place or converted
 *                   into workspace (op_stage.h) and converted back after the kernel;
 *   TR_ROWS_ONE     [N], f32 (saved statistics): a pointer at row r0;
 *   TR_ROWS_WHOLE   any float dtype, staged once before the loop (weights, biases; a tensor
 *                   the op writes goes back after it);
 *   TR_ROWS_DIRECT  f32, the tensor's own data whole (a parameter gradient the kernel +=).
 *
 * Blocks are the whole tensor when every BLOCK argument is f32 (no copies), else
 * tr_stage_block_rows(C) rows (a few MiB of workspace per operand whatever N is); an
 * elementwise op runs rows of one element, an op over whole tensors one row. A NULL tensor
 * gives a NULL pointer. Every block is released before the call returns, on error
 * too. */
#ifndef TR_STAGE_ROWS_H
#define TR_STAGE_ROWS_H

#include "op_table.h"

enum { TR_ROWS_BLOCK = 1, TR_ROWS_ONE = 2, TR_ROWS_WHOLE = 3, TR_ROWS_DIRECT = 4 };

/* The kernel over one block: p[i] is argument i's f32 pointer (NULL for a NULL tensor or
 * an argument without a layout), nr the block's rows. */
typedef void (*tr_rows_fn)(const tr_op_call *c, float *const *p, int64_t nr, int64_t C, void *work);

/* The rows per block the loop uses for this call (for a slot that sizes scratch by it). */
int64_t tr_stage_rows_step(const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N, int64_t C);

/* Runs fn over the N rows of C of call c of op d, block by block; layout[i] is argument i's
 * (0: not staged). work is passed through. TR_OK or the allocator's TR_EOOM. */
int tr_stage_rows(tr_ctx *ctx, const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N,
                  int64_t C, tr_rows_fn fn, void *work);

#endif
