/* op_table.h — the one place where an op is described and where a backend plugs in (in
 * the spirit of ggml's backend interface). Internal to core/ (not fed to the FFI; the
 * public questions are in op_query.h).
 *
 * Each op is one tr_op_desc: its name, its tensor arguments in signature order (name,
 * role, dtype rule, whether it may be NULL), a shape check and one function per backend
 * slot (NULL: that backend has no implementation). The public tr_op_* functions are thin
 * wrappers that pack their arguments into a tr_op_call and call tr_op_run, which
 *   1. rejects a NULL tensor the description does not allow,
 *   2. requires every non-NULL tensor on one device,
 *   3. applies each argument's dtype rule,
 *   4. runs the op's shape check (which may record sizes in call->dim for the slot),
 *   5. dispatches to the device's slot, or returns the one error for a missing slot.
 * Nothing is written to an output before step 5. Adding a backend = filling its slots;
 * adding an op = one description in its family's file plus one line in op_list.h. */
#ifndef TR_OP_TABLE_H
#define TR_OP_TABLE_H

#include "tensor.h"
#include "op_query.h"

/* What an argument is to the op. */
typedef enum tr_op_role {
    TR_ARG_IN = 0,   /* read only */
    TR_ARG_OUT = 1,  /* overwritten (=) */
    TR_ARG_ACC = 2   /* read and written: accumulates (+=) or updated in place */
} tr_op_role;

/* Which dtypes an argument accepts. */
typedef enum tr_op_dtype_rule {
    TR_DT_FLOAT = 0, /* f32, bf16 or f16 */
    TR_DT_F32 = 1,   /* f32 only: parameter gradients, saved statistics, optimizer state */
    TR_DT_INDEX = 2, /* i32 or i64: ids, targets */
    TR_DT_MASK = 3,  /* i32, i64 or a float dtype: nonzero = keep */
    TR_DT_HALF = 4,  /* bf16 or f16: the half copy of a weight */
    TR_DT_ANY = 5    /* any of the five */
} tr_op_dtype_rule;

typedef struct tr_op_arg {
    const char *name;
    unsigned char role;      /* tr_op_role */
    unsigned char dtype;     /* tr_op_dtype_rule */
    unsigned char nullable;  /* 1: NULL is allowed (skipped gradient, optional bias/mask) */
} tr_op_arg;

enum { TR_OP_MAX_TENSORS = 10, TR_OP_MAX_SCALARS = 8, TR_OP_MAX_INTS = 4, TR_OP_MAX_DIMS = 6 };

/* Backend slots. */
enum { TR_SLOT_CPU = 0, TR_SLOT_CUDA = 1, TR_SLOT_COUNT = 2 };

/* One call's arguments: tensors in the description's order, then the op's scalars. The
 * tensors are const because the call never changes a tensor's header; outputs are
 * written through their data pointers. */
typedef struct tr_op_call {
    const tr_tensor *t[TR_OP_MAX_TENSORS];
    float f[TR_OP_MAX_SCALARS];     /* float scalars (eps, alpha, lr, ...) */
    int64_t i[TR_OP_MAX_INTS];      /* integer scalars (kind, mode, step, ignore_index, ...) */
    uint64_t u;                     /* an RNG stream offset */
    const void *p;                  /* a pointer argument: an RNG key or a config */
    void *res;                      /* a host result (global_norm's float, found_inf's int) */
    tr_tensor **list;               /* a tensor list (global_norm, scale_check_finite) */
    int nlist;
    int device;                     /* set by tr_op_run: the device of the op's tensors */
    int64_t dim[TR_OP_MAX_DIMS];    /* sizes the shape check derived, for the slot */
} tr_op_call;

typedef int (*tr_op_fn)(tr_ctx *ctx, tr_op_call *call);

typedef struct tr_op_desc {
    const char *name;
    int nargs;
    tr_op_arg args[TR_OP_MAX_TENSORS];
    tr_op_fn check;                 /* shapes and scalars; NULL: nothing beyond the rules */
    tr_op_fn slot[TR_SLOT_COUNT];   /* [TR_SLOT_CPU], [TR_SLOT_CUDA]; NULL = none */
} tr_op_desc;

/* Steps 1-5 above. Returns TR_OK, TR_EUSER (message in tr_ctx_err(ctx)) or the slot's
 * status (TR_EOOM from the allocator). */
int tr_op_run(tr_ctx *ctx, const tr_op_desc *op, tr_op_call *call);

/* For an op written as `static int NAME_impl(tr_ctx *ctx, int run, ...)` that checks its
 * shapes and returns when run is 0: defines NAME_check and NAME_cpu, passing the call's
 * arguments given as the macro's tail (expressions over `c`). */
#define TR_OP_IMPL_SLOTS(name, ...)                                                                  \
    static int name##_check(tr_ctx *ctx, tr_op_call *c) { return name##_impl(ctx, 0, __VA_ARGS__); } \
    static int name##_cpu(tr_ctx *ctx, tr_op_call *c) { return name##_impl(ctx, 1, __VA_ARGS__); }

/* The table, in op_list.h's order. */
const tr_op_desc *tr_op_at(int i);
const tr_op_desc *tr_op_find(const char *name);

/* The one error for a missing implementation: `what` (an op or tensor function) has no implementation for
 * `device`. Also used by tensor.c for data movement to a device. */
int tr_op_fail_not_built(tr_ctx *ctx, const char *what, int device);
/* (tr_op_fail_not_built and the helpers below live in op_errors.c.) */

/* TR_EUSER "<op>: <name> has shape S but must have N elements (what)" unless it has. */
int tr_op_want_numel(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int64_t numel,
                     const char *what);
/* TR_EUSER "<op>: <name> has shape S but must be W" unless t has exactly that shape. */
int tr_op_want_shape(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int ndim,
                     const int64_t *shape);

/* "[4, 7]" (tr_op_shape, at least 160 bytes) and "[4, 7] bf16" (tr_op_describe) of a
 * tensor, for messages; "NULL" for a NULL tensor. */
const char *tr_op_shape(const tr_tensor *t, char *buf);
const char *tr_op_describe(char *buf, size_t len, const tr_tensor *t);

/* "cpu" or "cuda:N" into buf. */
void tr_op_device_name(char *buf, size_t len, int device);

/* Splits t into N rows of its last dimension C (ndim 0: N = C = 1). */
void tr_op_rows(const tr_tensor *t, int64_t *N, int64_t *C);

#endif
