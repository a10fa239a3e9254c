/* tensor_version.h — a write counter per storage, and one derived copy kept beside it
 * (internal to core/; not part of the FFI header).
 *
 * Every path that writes a tensor's bytes bumps its storage's version: the op dispatcher
 * for each output and in-place argument (core/ops/op_table.c), tr_tensor_copy/fill/write/
 * write_converted, and the distributed broadcast. A copy derived from the bytes (a Linear
 * weight packed into oneDNN's layout, core/ops/linear_pack.c) records the version it was
 * made from and is rebuilt when the version moved, so that an optimizer step, a load or a
 * LoRA merge can never leave a stale copy behind. The derived copy is freed with the
 * storage (by its own free function), before the storage's bytes. */
#ifndef TR_TENSOR_VERSION_H
#define TR_TENSOR_VERSION_H

#include "tensor.h"

/* The storage's write count (0 for NULL). Views share their storage's count. */
uint64_t tr_tensor_version(const tr_tensor *t);
/* Records a write of t's bytes (const: the header is unchanged; the storage is not). */
void tr_tensor_mark_written(const tr_tensor *t);

/* The derived copy attached to t's storage, or NULL. */
void *tr_tensor_derived(const tr_tensor *t);
/* Attaches `derived` (freed by derived_free when the storage goes, or when another copy
 * replaces it): 0; -1 and nothing attached for a header without a storage (a test's
 * tensor over its own buffer), which then has no derived copies. */
int tr_tensor_set_derived(const tr_tensor *t, void *derived, void (*derived_free)(void *derived));

#endif
