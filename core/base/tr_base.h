/* tr_base.h — the vocabulary every part of the runtime shares: status codes, dtypes,
 * memory tags, devices and the error record.
 *
 * Like every header under core/, this file is valid LuaJIT ffi.cdef input once its
 * '#' lines are dropped (lua/trainer/core/ffi.lua does that): no macros inside declarations,
 * only fixed-width integer types, enums with explicit values, plain structs. */
#ifndef TR_BASE_H
#define TR_BASE_H

#include <stddef.h>
#include <stdint.h>

/* Every fallible core function returns one of these (0 = success) and fills a tr_error. */
typedef enum tr_status {
    TR_OK = 0,
    TR_EUSER = 1,      /* bad input a user can fix: file, value, shape, dtype */
    TR_EOOM = 2,       /* the allocator could not serve a request; message carries the ledger */
    TR_EINTERNAL = 3   /* a system, BLAS or CUDA call failed */
} tr_status;

typedef enum tr_dtype {
    TR_F32 = 0,
    TR_BF16 = 1,
    TR_F16 = 2,
    TR_I32 = 3,
    TR_I64 = 4,
    TR_NDTYPES = 5
} tr_dtype;

/* What an allocation is for; the allocator keeps current and peak bytes per tag. */
typedef enum tr_tag {
    TR_TAG_WEIGHTS = 0,
    TR_TAG_GRADS = 1,
    TR_TAG_OPTIMIZER = 2,
    TR_TAG_ACTIVATIONS = 3,
    TR_TAG_WORKSPACE = 4,
    TR_NTAGS = 5
} tr_tag;

/* Device numbering: TR_CPU for the host, 0..n-1 for cuda:0..cuda:n-1. */
enum { TR_CPU = -1 };

/* An error record. Functions that can fail take a tr_error * (NULL allowed: the message
 * is then dropped) and, on failure, set status and a one-paragraph message. */
typedef struct tr_error {
    int status;
    char msg[2048];
} tr_error;

/* Sets err (when non-NULL) and returns status, so callers write
 * `return tr_fail(err, TR_EUSER, "...%s", x);`. */
int tr_fail(tr_error *err, int status, const char *fmt, ...);
void tr_error_clear(tr_error *err);

const char *tr_dtype_name(int dtype);
size_t tr_dtype_size(int dtype);
const char *tr_tag_name(int tag);
/* Name -> enum; -1 when the name is unknown. */
int tr_dtype_from_name(const char *name);
int tr_tag_from_name(const char *name);

#endif
