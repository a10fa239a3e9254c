/* tensor.c — tensors and their storages (tensor.h has the contract).
 *
 * A storage is { base, nbytes, refcount, allocator, device, tag }: its bytes come from
 * the device's caching allocator with the tensor's tag, and go back to it when the
 * last tensor referring to it is freed. Tensor headers and storage records are small
 * malloc'd structs, not tracked by the allocator. Views (reshape, narrow on dim 0)
 * share the storage and hold a reference, so they outlive the tensor they came from.
 * Refcounts are plain integers: creating and freeing tensors that share a storage is
 * single-threaded (ops may run in parallel; ownership changes do not).
 *
 * Every failure leaves the inputs unchanged and sets the context's error. Data movement
 * that involves a GPU (copy, fill, write, read) is the device backend's (core/ctx/backend.h):
 * this file checks the arguments, keeps the CPU path, and hands anything else over; in a
 * build without a device backend that is a clear TR_EUSER error, never a crash. */
#include "tensor.h"
#include "tensor_version.h"
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tr_storage {
    void *base;
    size_t nbytes;
    int64_t refcount;
    tr_alloc *alloc;
    int32_t device;
    int32_t tag;
    /* tensor_version.h: bumped on every write of the bytes; a derived copy (a weight packed
     * for oneDNN) remembers the version it was made from, and is freed with the storage */
    uint64_t version;
    void *derived;
    void (*derived_free)(void *derived);
};

enum { TENSOR_MAX_DIMS = 8 };

/* ------------------------------------------------------------ messages */

/* A NULL ctx is tolerated: the call still fails, its message is dropped. */
static tr_error *ctx_err(tr_ctx *ctx) { return ctx ? tr_ctx_err(ctx) : NULL; }

/* "[2, 3, 4]" into buf; shape may be NULL when ndim is 0. */
static const char *shape_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}

/* ------------------------------------------------------------ validation */

/* numel of a shape given to new/reshape: ndim in 0..8, every dim >= 0, no overflow of
 * numel * element size. `allow_infer` lets one dim be -1 (reshape). */
static int check_shape(tr_ctx *ctx, const char *fn, int ndim, const int64_t *shape, int dtype,
                       int allow_infer, int64_t *numel_out, int *infer_dim)
{
    char sbuf[256];
    if (ndim < 0 || ndim > TENSOR_MAX_DIMS)
        return tr_fail(ctx_err(ctx), TR_EUSER,
                       "%s: ndim %d is out of range: tensors have 0 to %d dimensions", fn, ndim,
                       TENSOR_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tr_fail(ctx_err(ctx), TR_EUSER, "%s: shape is NULL but ndim is %d", fn, ndim);
    int64_t numel = 1;
    *infer_dim = -1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1 && allow_infer && *infer_dim < 0) {
            *infer_dim = i;
            continue;
        }
        if (shape[i] < 0)
            return tr_fail(ctx_err(ctx), TR_EUSER,
                           "%s: shape %s has a negative size %lld in dimension %d; sizes must be >= 0%s",
                           fn, shape_str(sbuf, sizeof sbuf, ndim, shape), (long long)shape[i], i,
                           allow_infer ? " (or -1, once, to infer it)" : "");
        if (__builtin_mul_overflow(numel, shape[i], &numel))
            return tr_fail(ctx_err(ctx), TR_EUSER,
                           "%s: shape %s has more elements than fit in 64 bits", fn,
                           shape_str(sbuf, sizeof sbuf, ndim, shape));
    }
    int64_t bytes;
    if (__builtin_mul_overflow(numel, (int64_t)tr_dtype_size(dtype), &bytes) || (uint64_t)bytes > SIZE_MAX)
        return tr_fail(ctx_err(ctx), TR_EUSER,
                       "%s: shape %s of %s needs more bytes than fit in a size_t", fn,
                       shape_str(sbuf, sizeof sbuf, ndim, shape), tr_dtype_name(dtype));
    *numel_out = numel;
    return TR_OK;
}

/* ------------------------------------------------------------ creation and views */

tr_tensor *tr_tensor_new(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int device, int tag)
{
    if (!ctx) return NULL;
    if (dtype < 0 || dtype >= TR_NDTYPES) {
        tr_fail(ctx_err(ctx), TR_EUSER,
                "tr_tensor_new: dtype %d is not a tensor dtype: use 0 f32, 1 bf16, 2 f16, 3 i32 or 4 i64",
                dtype);
        return NULL;
    }
    if (tag < 0 || tag >= TR_NTAGS) {
        tr_fail(ctx_err(ctx), TR_EUSER,
                "tr_tensor_new: tag %d is not a memory tag: use 0 weights, 1 grads, 2 optimizer, "
                "3 activations or 4 workspace",
                tag);
        return NULL;
    }
    int64_t numel;
    int infer;
    if (check_shape(ctx, "tr_tensor_new", ndim, shape, dtype, 0, &numel, &infer) != TR_OK) return NULL;
    tr_alloc *alloc = tr_ctx_alloc(ctx, device);
    if (!alloc) return NULL;

    tr_tensor *t = malloc(sizeof *t);
    tr_storage *st = malloc(sizeof *st);
    if (!t || !st) {
        free(t);
        free(st);
        tr_fail(ctx_err(ctx), TR_EOOM, "tr_tensor_new: out of host memory for a tensor header");
        return NULL;
    }
    size_t nbytes = (size_t)numel * tr_dtype_size(dtype);
    void *base = NULL;
    if (tr_alloc_malloc(alloc, nbytes, tag, 0, &base, ctx_err(ctx)) != TR_OK) {
        free(t);
        free(st);
        return NULL;
    }
    *st = (tr_storage){ .base = base, .nbytes = nbytes, .refcount = 1, .alloc = alloc,
                        .device = device, .tag = tag };
    memset(t, 0, sizeof *t);
    t->data = base;
    t->storage = st;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    t->ndim = ndim;
    t->dtype = dtype;
    t->device = device;
    t->tag = tag;
    return t;
}

tr_tensor *tr_tensor_zeros(tr_ctx *ctx, int ndim, const int64_t *shape, int dtype, int device, int tag)
{
    tr_tensor *t = tr_tensor_new(ctx, ndim, shape, dtype, device, tag);
    if (!t) return NULL;
    if (tr_tensor_fill(ctx, t, 0.0) != TR_OK) {
        tr_tensor_free(t);
        return NULL;
    }
    return t;
}

/* A header for `data` with `shape`, sharing t's storage (one more reference). */
static tr_tensor *make_view(tr_ctx *ctx, const tr_tensor *t, int ndim, const int64_t *shape,
                            int64_t numel, void *data)
{
    tr_tensor *v = malloc(sizeof *v);
    if (!v) {
        tr_fail(ctx_err(ctx), TR_EOOM, "out of host memory for a tensor view header");
        return NULL;
    }
    *v = *t;
    memset(v->shape, 0, sizeof v->shape);
    for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
    v->ndim = ndim;
    v->numel = numel;
    v->data = data;
    v->storage->refcount++;
    return v;
}

tr_tensor *tr_tensor_reshape(tr_ctx *ctx, tr_tensor *t, int ndim, const int64_t *shape)
{
    if (!ctx) return NULL;
    if (!t) {
        tr_fail(ctx_err(ctx), TR_EUSER, "tr_tensor_reshape: the tensor is NULL");
        return NULL;
    }
    int64_t numel;
    int infer;
    if (check_shape(ctx, "tr_tensor_reshape", ndim, shape, t->dtype, 1, &numel, &infer) != TR_OK)
        return NULL;
    int64_t resolved[TENSOR_MAX_DIMS];
    for (int i = 0; i < ndim; i++) resolved[i] = shape[i];
    char from[256], to[256];
    if (infer >= 0) {
        /* numel is the product of the other dims */
        if (numel == 0 || t->numel % numel != 0) {
            tr_fail(ctx_err(ctx), TR_EUSER,
                    "tr_tensor_reshape: cannot infer the -1 in %s from a tensor of shape %s (%lld "
                    "elements): the other sizes must divide the element count",
                    shape_str(to, sizeof to, ndim, shape), shape_str(from, sizeof from, t->ndim, t->shape),
                    (long long)t->numel);
            return NULL;
        }
        resolved[infer] = t->numel / numel;
        numel = t->numel;
    }
    if (numel != t->numel) {
        tr_fail(ctx_err(ctx), TR_EUSER,
                "tr_tensor_reshape: shape %s has %lld elements but the tensor of shape %s has %lld; "
                "a reshape keeps the element count",
                shape_str(to, sizeof to, ndim, resolved), (long long)numel,
                shape_str(from, sizeof from, t->ndim, t->shape), (long long)t->numel);
        return NULL;
    }
    return make_view(ctx, t, ndim, resolved, numel, t->data);
}

tr_tensor *tr_tensor_narrow(tr_ctx *ctx, tr_tensor *t, int64_t start, int64_t len)
{
    if (!ctx) return NULL;
    if (!t) {
        tr_fail(ctx_err(ctx), TR_EUSER, "tr_tensor_narrow: the tensor is NULL");
        return NULL;
    }
    char sbuf[256];
    if (t->ndim == 0) {
        tr_fail(ctx_err(ctx), TR_EUSER,
                "tr_tensor_narrow: a 0-dimensional tensor (a scalar) has no dimension 0 to narrow; "
                "reshape it to [1] first");
        return NULL;
    }
    int64_t rows = t->shape[0];
    if (start < 0 || len < 0 || start > rows || len > rows - start) {
        tr_fail(ctx_err(ctx), TR_EUSER,
                "tr_tensor_narrow: rows [%lld, %lld + %lld) are out of range for a tensor of shape %s: "
                "need 0 <= start, 0 <= len and start + len <= %lld",
                (long long)start, (long long)start, (long long)len,
                shape_str(sbuf, sizeof sbuf, t->ndim, t->shape), (long long)rows);
        return NULL;
    }
    int64_t row_numel = 1;
    for (int i = 1; i < t->ndim; i++) row_numel *= t->shape[i];   /* <= numel unless rows == 0 */
    int64_t shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    shape[0] = len;
    size_t esize = tr_dtype_size(t->dtype);
    char *data = (char *)t->data + (size_t)(start * row_numel) * esize;
    return make_view(ctx, t, t->ndim, shape, len * row_numel, data);
}

void tr_tensor_free(tr_tensor *t)
{
    if (!t) return;
    tr_storage *st = t->storage;
    if (st && --st->refcount == 0) {
        if (st->derived && st->derived_free) st->derived_free(st->derived);
        tr_alloc_free(st->alloc, st->base);
        free(st);
    }
    free(t);
}

size_t tr_tensor_nbytes(const tr_tensor *t)
{
    return t ? (size_t)t->numel * tr_dtype_size(t->dtype) : 0;
}

/* ------------------------------------------------------------ versions (tensor_version.h) */

uint64_t tr_tensor_version(const tr_tensor *t) { return t && t->storage ? t->storage->version : 0; }

void tr_tensor_mark_written(const tr_tensor *t)
{
    if (t && t->storage) t->storage->version++;
}

void *tr_tensor_derived(const tr_tensor *t) { return t && t->storage ? t->storage->derived : NULL; }

int tr_tensor_set_derived(const tr_tensor *t, void *derived, void (*derived_free)(void *derived))
{
    if (!t || !t->storage) return -1;
    tr_storage *st = t->storage;
    if (st->derived && st->derived != derived && st->derived_free) st->derived_free(st->derived);
    st->derived = derived;
    st->derived_free = derived_free;
    return 0;
}

/* ------------------------------------------------------------ data movement */

static int ranges_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return na && nb && pa < pb + nb && pb < pa + na;
}

int tr_tensor_copy(tr_ctx *ctx, tr_tensor *dst, const tr_tensor *src)
{
    if (!dst || !src) return tr_fail(ctx_err(ctx), TR_EUSER, "tr_tensor_copy: a tensor is NULL");
    char a[256], b[256];
    if (dst->numel != src->numel)
        return tr_fail(ctx_err(ctx), TR_EUSER,
                       "tr_tensor_copy: destination %s has %lld elements but source %s has %lld; "
                       "shapes may differ but element counts must match",
                       shape_str(a, sizeof a, dst->ndim, dst->shape), (long long)dst->numel,
                       shape_str(b, sizeof b, src->ndim, src->shape), (long long)src->numel);
    size_t dn = tr_tensor_nbytes(dst), sn = tr_tensor_nbytes(src);
    tr_tensor_mark_written(dst);
    if (dst->device != TR_CPU || src->device != TR_CPU) {
        /* On one GPU an overlap is refused whatever the dtypes: cudaMemcpyAsync has no
         * memmove semantics. Copying a tensor onto itself changes nothing. */
        if (dst->device == src->device && dst->data == src->data && dst->dtype == src->dtype) return TR_OK;
        if (dst->device == src->device && ranges_overlap(dst->data, dn, src->data, sn))
            return tr_fail(ctx_err(ctx), TR_EUSER,
                           "tr_tensor_copy: source and destination overlap in the memory of cuda:%d; copy "
                           "into a new tensor instead",
                           dst->device);
        return tr_device_copy(ctx, "tr_tensor_copy", dst->data, dst->device, dst->dtype, src->data, src->device,
                            src->dtype, (size_t)src->numel);
    }
    if (dst->dtype != src->dtype && ranges_overlap(dst->data, dn, src->data, sn))
        return tr_fail(ctx_err(ctx), TR_EUSER,
                       "tr_tensor_copy: source (%s) and destination (%s) overlap in memory; a "
                       "converting copy needs separate tensors: copy into a new tensor instead",
                       tr_dtype_name(src->dtype), tr_dtype_name(dst->dtype));
    tr_convert(dst->data, dst->dtype, src->data, src->dtype, (size_t)src->numel);
    return TR_OK;
}

/* The bytes of one element of `dtype` holding `value`; integers must be in range. */
static int scalar_bytes(tr_ctx *ctx, int dtype, double value, unsigned char out[8])
{
    if (dtype == TR_I32 || dtype == TR_I64) {
        double lo = dtype == TR_I32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = dtype == TR_I32 ? 2147483648.0 : 9223372036854775808.0;
        if (!(value >= lo && value < hi))
            return tr_fail(ctx_err(ctx), TR_EUSER,
                           "tr_tensor_fill: %g does not fit a %s tensor (range %.0f .. %.0f); fill "
                           "a floating-point tensor instead",
                           value, tr_dtype_name(dtype), lo, hi - 1);
    }
    float f = (float)value;
    switch (dtype) {
    case TR_I32: { int32_t x = (int32_t)value; memcpy(out, &x, 4); break; }
    case TR_I64: { int64_t x = (int64_t)value; memcpy(out, &x, 8); break; }
    default: tr_convert(out, dtype, &f, TR_F32, 1); break;
    }
    return TR_OK;
}

int tr_tensor_fill(tr_ctx *ctx, tr_tensor *t, double value)
{
    if (!t) return tr_fail(ctx_err(ctx), TR_EUSER, "tr_tensor_fill: the tensor is NULL");
    unsigned char e[8] = { 0 };
    int rc = scalar_bytes(ctx, t->dtype, value, e);
    if (rc != TR_OK) return rc;
    size_t n = (size_t)t->numel;
    tr_tensor_mark_written(t);
    if (t->device != TR_CPU) return tr_device_fill(ctx, "tr_tensor_fill", t->data, t->device, e, tr_dtype_size(t->dtype), n);
    static const unsigned char zero[8] = { 0 };
    if (memcmp(e, zero, sizeof e) == 0) {   /* zeros (gradients each step): memset's wide stores */
        memset(t->data, 0, n * tr_dtype_size(t->dtype));
        return TR_OK;
    }
    switch (tr_dtype_size(t->dtype)) {
    case 2: { uint16_t x; memcpy(&x, e, 2); uint16_t *p = t->data; for (size_t i = 0; i < n; i++) p[i] = x; break; }
    case 4: { uint32_t x; memcpy(&x, e, 4); uint32_t *p = t->data; for (size_t i = 0; i < n; i++) p[i] = x; break; }
    case 8: { uint64_t x; memcpy(&x, e, 8); uint64_t *p = t->data; for (size_t i = 0; i < n; i++) p[i] = x; break; }
    default: break;
    }
    return TR_OK;
}

static int check_host_bytes(tr_ctx *ctx, const char *fn, const tr_tensor *t, const void *host, size_t nbytes)
{
    char sbuf[256];
    if (!t) return tr_fail(ctx_err(ctx), TR_EUSER, "%s: the tensor is NULL", fn);
    if (nbytes != tr_tensor_nbytes(t))
        return tr_fail(ctx_err(ctx), TR_EUSER,
                       "%s: %zu bytes given but the %s tensor of shape %s holds %zu bytes; pass "
                       "exactly numel * dtype size",
                       fn, nbytes, tr_dtype_name(t->dtype), shape_str(sbuf, sizeof sbuf, t->ndim, t->shape),
                       tr_tensor_nbytes(t));
    if (!host && nbytes) return tr_fail(ctx_err(ctx), TR_EUSER, "%s: the host buffer is NULL", fn);
    return TR_OK;
}

int tr_tensor_write(tr_ctx *ctx, tr_tensor *t, const void *host, size_t nbytes)
{
    int rc = check_host_bytes(ctx, "tr_tensor_write", t, host, nbytes);
    if (rc != TR_OK) return rc;
    tr_tensor_mark_written(t);
    if (t->device != TR_CPU)
        return tr_device_copy(ctx, "tr_tensor_write", t->data, t->device, t->dtype, host, TR_CPU, t->dtype,
                            (size_t)t->numel);
    if (nbytes) memmove(t->data, host, nbytes);
    return TR_OK;
}

/* On a device: returns once the host buffer holds the values (the stream is synchronised). */
int tr_tensor_read(tr_ctx *ctx, const tr_tensor *t, void *host, size_t nbytes)
{
    int rc = check_host_bytes(ctx, "tr_tensor_read", t, host, nbytes);
    if (rc != TR_OK) return rc;
    if (t->device != TR_CPU)
        return tr_device_copy(ctx, "tr_tensor_read", host, TR_CPU, t->dtype, t->data, t->device, t->dtype,
                            (size_t)t->numel);
    if (nbytes) memmove(host, t->data, nbytes);
    return TR_OK;
}

int tr_tensor_read_range(tr_ctx *ctx, const tr_tensor *t, size_t offset, void *host, size_t nbytes)
{
    const char *fn = "tr_tensor_read_range";
    if (!t) return tr_fail(ctx_err(ctx), TR_EUSER, "%s: the tensor is NULL", fn);
    size_t esize = tr_dtype_size(t->dtype), total = tr_tensor_nbytes(t);
    if (offset > total || nbytes > total - offset || offset % esize || nbytes % esize)
        return tr_fail(ctx_err(ctx), TR_EUSER,
                       "%s: bytes [%zu, %zu + %zu) are not whole %s elements inside the tensor's %zu bytes", fn,
                       offset, offset, nbytes, tr_dtype_name(t->dtype), total);
    if (!host && nbytes) return tr_fail(ctx_err(ctx), TR_EUSER, "%s: the host buffer is NULL", fn);
    if (nbytes == 0) return TR_OK;
    const char *src = (const char *)t->data + offset;
    if (t->device != TR_CPU)
        return tr_device_copy(ctx, "tr_tensor_read", host, TR_CPU, t->dtype, src, t->device, t->dtype, nbytes / esize);
    memmove(host, src, nbytes);
    return TR_OK;
}

int tr_tensor_write_converted(tr_ctx *ctx, tr_tensor *t, const void *host, int host_dtype, int64_t numel)
{
    const char *fn = "tr_tensor_write_converted";
    if (!t) return tr_fail(ctx_err(ctx), TR_EUSER, "%s: the tensor is NULL", fn);
    if (host_dtype < 0 || host_dtype >= TR_NDTYPES)
        return tr_fail(ctx_err(ctx), TR_EUSER, "%s: host dtype %d is not a tensor dtype", fn, host_dtype);
    if (numel != t->numel)
        return tr_fail(ctx_err(ctx), TR_EUSER, "%s: %lld host elements given but the tensor holds %lld", fn,
                       (long long)numel, (long long)t->numel);
    if (!host && numel) return tr_fail(ctx_err(ctx), TR_EUSER, "%s: the host buffer is NULL", fn);
    if (numel == 0) return TR_OK;
    tr_tensor_mark_written(t);
    if (t->device != TR_CPU)
        return tr_device_copy(ctx, "tr_tensor_write", t->data, t->device, t->dtype, host, TR_CPU, host_dtype,
                            (size_t)numel);
    if (host_dtype == t->dtype) memmove(t->data, host, (size_t)numel * tr_dtype_size(host_dtype));
    else tr_convert_unaligned(t->data, t->dtype, host, host_dtype, (size_t)numel);
    return TR_OK;
}

void tr_convert_unaligned(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n)
{
    size_t ds = tr_dtype_size(dst_dtype), ss = tr_dtype_size(src_dtype);
    if (!ds || !ss) return;
    int src_ok = (uintptr_t)src % ss == 0, dst_ok = (uintptr_t)dst % ds == 0;
    if (dst_dtype == src_dtype || (src_ok && dst_ok)) {
        tr_convert(dst, dst_dtype, src, src_dtype, n);   /* memmove for one dtype: any alignment */
        return;
    }
    enum { PIECE = 2048 };   /* elements per bounce: 16 KiB of i64 each way, on the stack */
    _Alignas(8) unsigned char in[PIECE * 8], out[PIECE * 8];
    for (size_t i = 0; i < n; i += PIECE) {
        size_t cnt = n - i < PIECE ? n - i : PIECE;
        const void *s = (const char *)src + i * ss;
        void *d = (char *)dst + i * ds;
        if (!src_ok) s = memcpy(in, s, cnt * ss);
        /* out is written here, not read: cppcheck takes the argument for a read */
        // cppcheck-suppress legacyUninitvar
        tr_convert(dst_ok ? d : out, dst_dtype, s, src_dtype, cnt);
        if (!dst_ok) memcpy(d, out, cnt * ds);
    }
}
