/* stage_rows.h — the one staging loop of the CPU slots: an op's kernel over f32 pointers,
 * whatever the dtypes of its tensors. The slot says how each argument is laid out against
 * the op's N rows; the op's description says what the loop does with it (its role: an IN
 * argument is read, an OUT one written back, an ACC one read and written back). A row of an
 * argument is numel / N of its elements: C for an [N, C] activation, T*H*D for a batch
 * element of [B, T, H, D] attention, I or O for a Linear's input or output.
 *
 *   TR_ROWS_BLOCK   rows r0 .. r0 + nr of each block, f32 in place or converted into
 *                   workspace (op_stage.h) and converted back after the kernel;
 *   TR_ROWS_ONE     the tensor's own data at row r0, any dtype, never converted (f32
 *                   saved statistics, an i32 or f32 mask);
 *   TR_ROWS_WHOLE   any float dtype, staged once before the loop (weights, biases, the
 *                   operands of a whole-tensor product; a tensor the op writes goes back
 *                   after it);
 *   TR_ROWS_FRESH   as TR_ROWS_WHOLE for an ACC argument the call overwrites (a product
 *                   with beta 0): not converted in before the loop;
 *   TR_ROWS_DIRECT  f32, the tensor's own data whole (a parameter gradient the kernel +=).
 *
 * Blocks are the whole tensor when every BLOCK argument is f32 (no copies), else
 * tr_stage_block_rows(C) rows (a few MiB of workspace per operand whatever N is) or the
 * slot's own step; an elementwise op runs rows of one element, an op over whole tensors one
 * row. A NULL tensor gives a NULL pointer. Every block is released before the call returns,
 * on error too. */
#ifndef TR_STAGE_ROWS_H
#define TR_STAGE_ROWS_H

#include "op_table.h"

enum { TR_ROWS_BLOCK = 1, TR_ROWS_ONE = 2, TR_ROWS_WHOLE = 3, TR_ROWS_DIRECT = 4, TR_ROWS_FRESH = 5 };

/* The kernel over one block: p[i] is argument i's f32 pointer (NULL for a NULL tensor or
 * an argument without a layout; a TR_ROWS_ONE argument's data whatever its dtype), rows
 * r0 .. r0 + nr of C. Returns TR_OK or the error that ends the loop. */
typedef int (*tr_rows_fn)(const tr_op_call *c, float *const *p, int64_t r0, int64_t nr, int64_t C, void *work);

/* The rows per block the loop uses for this call (for a slot that sizes scratch by it):
 * N when every BLOCK argument is f32, else tr_stage_block_rows(C). */
int64_t tr_stage_rows_step(const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N, int64_t C);

/* Runs fn over the N rows of C of call c of op d, block by block of tr_stage_rows_step rows;
 * layout[i] is argument i's (0: not staged). work is passed through. TR_OK, the allocator's
 * TR_EOOM or fn's error. */
int tr_stage_rows(tr_ctx *ctx, const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N,
                  int64_t C, tr_rows_fn fn, void *work);

/* As tr_stage_rows in blocks of `step` rows (a slot whose kernel wants its own blocking). */
int tr_stage_rows_by(tr_ctx *ctx, const tr_op_desc *d, const tr_op_call *c, const unsigned char *layout, int64_t N,
                     int64_t C, int64_t step, tr_rows_fn fn, void *work);

/* The paths that convert blocks of rows into each thread's stack and write them back from it
 * (one pass over memory, where the loop above stages workspace blocks in three): fn(c, r0, nr,
 * W, Bi) over the N rows in blocks of `rows`, W and Bi a slot's staged parameters (or NULL),
 * in parallel unless the call's `elems` are few (16384: no OpenMP team for a small call). */
typedef void (*tr_stack_block_fn)(const tr_op_call *c, int64_t r0, int64_t nr, const float *W, const float *Bi);
void tr_stage_stack_blocks(const tr_op_call *c, int64_t N, int64_t rows, int64_t elems, tr_stack_block_fn fn,
                           const float *W, const float *Bi);

/* t's element e: the address of a block of rows in t's own dtype. */
static inline char *tr_stage_elem(const tr_tensor *t, int64_t e)
{
    return (char *)t->data + (size_t)e * tr_dtype_size(t->dtype);
}

#endif
