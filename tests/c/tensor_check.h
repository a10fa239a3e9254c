/* tensor_check.h — what the C op tests share about tensors: a CPU tensor made from float64
 * values, a tensor's values read back as f32, and the check that an op left no workspace
 * allocated. Header-only and static, like op_check.h (which it includes); include after
 * check.h (it reports through CHECK). */
#ifndef TR_TENSOR_CHECK_H
#define TR_TENSOR_CHECK_H

#include <stdint.h>
#include <stdlib.h>

#include "op_check.h"
#include "trainer.h"

/* A CPU tensor of `dtype` holding vals (rounded through f32), or uninitialised when vals is
 * NULL; NULL when the allocation fails. */
static inline tr_tensor *tc_tensor(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, const double *vals)
{
    tr_tensor *t = tr_tensor_new(ctx, ndim, shape, dtype, TR_CPU, TR_TAG_ACTIVATIONS);
    if (!t) return NULL;
    if (vals) {
        float *f = malloc((size_t)t->numel * 4 + 4);
        if (!f) {
            tr_tensor_free(t);
            return NULL;
        }
        oc_to_f32(f, vals, t->numel);
        tr_convert(t->data, dtype, f, TR_F32, (size_t)t->numel);
        free(f);
    }
    return t;
}

/* The tensor's values as f32 (the caller frees; NULL when out of memory). */
static inline float *tc_values_f32(const tr_tensor *t)
{
    float *f = malloc((size_t)t->numel * 4 + 4);
    if (f) tr_convert(f, TR_F32, t->data, t->dtype, (size_t)t->numel);
    return f;
}

/* Every op frees its staging and scratch: none of ctx's CPU workspace stays allocated. */
static inline void tc_no_workspace_left(tr_ctx *ctx, const char *after)
{
    tr_alloc_stats s;
    tr_alloc_get_stats(tr_ctx_alloc(ctx, TR_CPU), &s);
    CHECK(s.tag_allocated[TR_TAG_WORKSPACE] == 0, "%s left %llu workspace bytes allocated", after,
          (unsigned long long)s.tag_allocated[TR_TAG_WORKSPACE]);
}

#endif
