/* tr_base.c — error records and the names of dtypes and tags. */
#include "tr_base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tr_fail(tr_error *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void tr_error_clear(tr_error *err)
{
    if (err) {
        err->status = TR_OK;
        err->msg[0] = '\0';
    }
}

static const char *const dtype_names[TR_NDTYPES] = { "f32", "bf16", "f16", "i32", "i64" };
static const size_t dtype_sizes[TR_NDTYPES] = { 4, 2, 2, 4, 8 };
static const char *const tag_names[TR_NTAGS] = { "weights", "grads", "optimizer", "activations",
                                                 "workspace" };

const char *tr_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < TR_NDTYPES ? dtype_names[dtype] : "?";
}

size_t tr_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < TR_NDTYPES ? dtype_sizes[dtype] : 0;
}

const char *tr_tag_name(int tag)
{
    return tag >= 0 && tag < TR_NTAGS ? tag_names[tag] : "?";
}

int tr_dtype_from_name(const char *name)
{
    for (int i = 0; i < TR_NDTYPES; i++)
        if (strcmp(name, dtype_names[i]) == 0) return i;
    return -1;
}

int tr_tag_from_name(const char *name)
{
    for (int i = 0; i < TR_NTAGS; i++)
        if (strcmp(name, tag_names[i]) == 0) return i;
    return -1;
}

