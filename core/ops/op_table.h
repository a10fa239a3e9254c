/* op_table.h — the one place where an op is described, and the interface a backend plugs
 * into (in the spirit of ggml's backend interface). Internal to core/ (not fed to the FFI;
 * the public questions are in op_query.h).
 *
 * Each op is one tr_op_desc: its name, its id (its line in op_list.h), its tensor arguments
 * in signature order (name, role, dtype rule, whether it may be NULL) and a shape check. A
 * description names no backend: each backend (core/cpu_ops/, core/cuda_ops/) registers a
 * tr_op_backend, its own table of slots by op id, each with an optional supports(call)
 * predicate, and says which device numbers are its own; backend_list.h lists them. The
 * public tr_op_* functions are thin wrappers that pack their arguments into a tr_op_call
 * and call tr_op_run, which
 *   1. rejects a NULL tensor the description does not allow,
 *   2. requires every non-NULL tensor on one device,
 *   3. applies each argument's dtype rule,
 *   4. runs the op's shape check (which may record sizes in call->dim for the slot),
 *   5. dispatches to the slot of the backend that owns the device, or returns the one
 *      error for a missing slot or a call the slot's predicate declines.
 * Nothing is written to an output before step 5. Adding a backend = a folder with its
 * slots and its tr_op_backend, and one line in backend_list.h; adding an op = one
 * description in its family's file, one line in op_list.h, and a slot per backend. */
#ifndef TR_OP_TABLE_H
#define TR_OP_TABLE_H

#include "tensor.h"
#include "op_query.h"

#include <stddef.h>

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

enum { TR_OP_MAX_TENSORS = 12, TR_OP_MAX_SCALARS = 8, TR_OP_MAX_INTS = 4, TR_OP_MAX_DIMS = 6 };

/* Op ids: an op's position in op_list.h; TR_OP_COUNT ops in all. */
enum tr_op_id {
#define TR_OP(n, args, scalars) TR_OPID_##n,
#include "op_list.h"
#undef TR_OP
    TR_OP_COUNT
};

/* Each op's tensor arguments by name, in op_list.h's order: tr_args_layernorm has the
 * members out, mean, rstd, x, weight, bias. A call holds them as call->t[i] and, for the
 * op being run, as call->layernorm.x (one union, so both name the same pointers). */
#define TR_A(n, role, rule, nullable) const tr_tensor *n;
#define TR_OP(n, args, scalars)                                                                                        \
    typedef struct tr_args_##n {                                                                                       \
        args                                                                                                           \
    } tr_args_##n;
#include "op_list.h"
#undef TR_OP
#undef TR_A

/* One call's arguments: tensors in the description's order (by index, or by name through
 * the op's member), then the op's scalars. The tensors are const because the call never
 * changes a tensor's header; outputs are written through their data pointers. */
typedef struct tr_op_call {
    union {
        const tr_tensor *t[TR_OP_MAX_TENSORS];
#define TR_OP(n, args, scalars) tr_args_##n n;
#include "op_list.h"
#undef TR_OP
    };
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

/* An op's infer step: the shapes and dtypes of its OUT arguments from its other arguments
 * and scalars (the OUT tensors of the call are NULL): shape[i], ndim[i] and dtype[i] for
 * each OUT argument i (the others are left alone). It never fails on inconsistent inputs:
 * it gives some shape, and the op's check then rejects the call in its own words. */
typedef int (*tr_op_infer_fn)(tr_ctx *ctx, const tr_op_call *call, int64_t shape[][8], int *ndim, int *dtype);

/* A scalar argument: call->f[index] (slot 'f') or call->i[index] (slot 'i'); dflt is the
 * binding's value when the caller gives none (NAN: required). */
typedef struct tr_op_scalar {
    const char *name;
    char slot;
    unsigned char index;
    double dflt;
} tr_op_scalar;

typedef struct tr_op_desc {
    const char *name;
    int nargs;
    tr_op_arg args[TR_OP_MAX_TENSORS];
    tr_op_fn check;       /* shapes and scalars: tr_check_<op>, in its family's file */
    tr_op_infer_fn infer; /* tr_infer_<op> where the family defines it, else NULL */
    int id;               /* TR_OPID_<name> */
    int nscalars;
    tr_op_scalar scalars[TR_OP_MAX_SCALARS + TR_OP_MAX_INTS]; /* in the C wrapper's order */
} tr_op_desc;

/* The index in call->t of op's argument `name` (a constant: TR_ARGI(layernorm, x) is 3). */
#define TR_ARGI(op, name) ((int)(offsetof(tr_args_##op, name) / sizeof(const tr_tensor *)))

/* Every op's description (op_table.c, from op_list.h) and check (its family's file). */
#define TR_OP(n, args, scalars)                                                                                        \
    extern const tr_op_desc tr_opd_##n;                                                                                \
    int tr_check_##n(tr_ctx *ctx, tr_op_call *call);
#include "op_list.h"
#undef TR_OP

/* ------------------------------------------------------------ backends */

/* 1 when the slot can run this call (dtypes, shapes, alignment); it runs after the op's
 * checks, so it sees a well-formed call. */
typedef int (*tr_op_supports_fn)(const tr_op_call *call);

typedef struct tr_op_slot {
    tr_op_fn run;               /* NULL: this backend has no implementation of the op */
    tr_op_supports_fn supports; /* NULL: every call the op's checks accept */
} tr_op_slot;

typedef struct tr_op_backend {
    const char *name;              /* "cpu", "cuda" */
    int (*owns)(int device);       /* 1 for the device numbers that are this backend's */
    int (*present)(int device);    /* 1 when such a device exists in this process */
    tr_op_slot slots[TR_OP_COUNT]; /* by op id */
} tr_op_backend;

/* The backend that owns `device` (NULL: none in this build), and op's slot there (NULL:
 * no backend or no implementation). */
const tr_op_backend *tr_op_backend_of(int device);
const tr_op_slot *tr_op_slot_of(const tr_op_desc *op, int device);

/* Steps 1-5 above. Returns TR_OK, TR_EUSER (message in tr_ctx_err(ctx)) or the slot's
 * status (TR_EOOM from the allocator). */
int tr_op_run(tr_ctx *ctx, const tr_op_desc *op, tr_op_call *call);
/* A public wrapper's body: tr_op_run of op `name` on the call the designated initializers
 * make (.t = { the tensors in the description's order }, .f, .i, .p, ...). */
#define TR_OP_RUN_CALL(ctx, name, ...) tr_op_run((ctx), &tr_opd_##name, &(tr_op_call){ __VA_ARGS__ })

/* Defines tr_check_NAME as a call of fn(ctx, ...), the macro's tail being expressions over
 * the call `c` (a backend's slot over a function of the same arguments is defined alike: for
 * the CPU, TR_CPU_SLOT_BY in core/cpu_ops/cpu_slot.h). */
#define TR_OP_CHECK_BY(name, fn, ...)                                                                                  \
    int tr_check_##name(tr_ctx *ctx, tr_op_call *c)                                                                    \
    {                                                                                                                  \
        return fn(ctx, __VA_ARGS__);                                                                                   \
    }

/* The table, in op_list.h's order. */
const tr_op_desc *tr_op_at(int i);
const tr_op_desc *tr_op_find(const char *name);

/* The one error for a missing implementation: `what` (an op or tensor function) has no implementation for
 * `device`. Also used by tensor.c for data movement to a device. */
int tr_op_fail_not_built(tr_ctx *ctx, const char *what, int device);
/* The error for a call a backend's supports predicate declines (TR_EUSER). */
int tr_op_fail_unsupported(tr_ctx *ctx, const tr_op_desc *op, const tr_op_call *call);
/* (tr_op_fail_not_built and the helpers below live in op_errors.c.) */

/* TR_EUSER "<op>: <name> has shape S but must have N elements (what)" unless it has. */
int tr_op_want_numel(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int64_t numel,
                     const char *what);
/* TR_EUSER "<op>: <name> has shape S but must be W" unless t has exactly that shape. */
int tr_op_want_shape(tr_ctx *ctx, const char *op, const char *name, const tr_tensor *t, int ndim,
                     const int64_t *shape);
/* tr_op_want_shape for each of the n tensors ts (named names) that is not NULL, in order:
 * the arguments of an op that share one shape. */
int tr_op_want_shapes(tr_ctx *ctx, const char *op, const char *const *names, const tr_tensor *const *ts, int n,
                      int ndim, const int64_t *shape);

/* "[4, 7]" (tr_op_shape, at least 160 bytes) and "[4, 7] bf16" (tr_op_describe) of a
 * tensor, for messages; "NULL" for a NULL tensor. */
const char *tr_op_shape(const tr_tensor *t, char *buf);
const char *tr_op_describe(char *buf, size_t len, const tr_tensor *t);

/* "cpu" or "cuda:N" into buf. */
void tr_op_device_name(char *buf, size_t len, int device);

/* Splits t into N rows of its last dimension C (ndim 0: N = C = 1). */
void tr_op_rows(const tr_tensor *t, int64_t *N, int64_t *C);

/* For infer steps: output a gets the shape of t and dtype dt; output a gets the ndim dims
 * `dims` and dtype dt. */
void tr_op_infer_like(int64_t shape[][8], int *ndim, int *dtype, int a, const tr_tensor *t, int dt);
void tr_op_infer_dims(int64_t shape[][8], int *ndim, int *dtype, int a, int n, const int64_t *dims, int dt);
/* The infer step tr_infer_<name> of an op whose one output (argument 0) has the shape of
 * `like` and the dtype dt, both expressions over the call `c`. */
#define TR_OP_INFER_LIKE(name, like, dt)                                                                               \
    int tr_infer_##name(tr_ctx *ctx, const tr_op_call *c, int64_t shape[][8], int *ndim, int *dtype)                   \
    {                                                                                                                  \
        tr_op_infer_like(shape, ndim, dtype, 0, (like), (dt));                                                         \
        return TR_OK;                                                                                                  \
    }

#endif
