/* safetensors.c — the safetensors dtype table and the single-file reader: mmap, validate
 * everything the format promises, then hand out pointers into the mapping.
 *
 * Invariants of an open tr_st_file: `root` is the parsed header and owns every string the
 * file hands out (names, dtype names, metadata); `infos` is sorted by data offset and
 * tiles the data area exactly; `by_name` is a permutation of 0..n-1 sorted by strcmp of
 * the names (lookups are binary searches); the mapping lives until tr_st_close. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

/* The format's own limit (the reference reader refuses larger headers). */
#define ST_MAX_HEADER 100000000ull

/* ------------------------------------------------------------ dtypes */

/* In the reference writer's order (its Dtype enum): files list wider dtypes first,
 * i.e. later rows first. */
static const struct st_dtype {
    const char *name;
    int32_t bits;
    int32_t tr;
} st_dtypes[] = {
    { "BOOL", 8, -1 },       { "F4", 4, -1 },           { "F6_E2M3", 6, -1 },
    { "F6_E3M2", 6, -1 },    { "U8", 8, -1 },           { "I8", 8, -1 },
    { "F8_E5M2", 8, -1 },    { "F8_E4M3", 8, -1 },      { "F8_E8M0", 8, -1 },
    { "F8_E4M3FNUZ", 8, -1 }, { "F8_E5M2FNUZ", 8, -1 }, { "I16", 16, -1 },
    { "U16", 16, -1 },       { "F16", 16, TR_F16 },     { "BF16", 16, TR_BF16 },
    { "I32", 32, TR_I32 },   { "U32", 32, -1 },         { "F32", 32, TR_F32 },
    { "C64", 64, -1 },       { "F64", 64, -1 },         { "I64", 64, TR_I64 },
    { "U64", 64, -1 },
};
enum { ST_NDTYPES = sizeof st_dtypes / sizeof st_dtypes[0] };

int32_t tr_st_dtype_order(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(name, st_dtypes[i].name) == 0) return i;
    return -1;
}

int32_t tr_st_dtype_bits(const char *name)
{
    int r = tr_st_dtype_order(name);
    return r < 0 ? 0 : st_dtypes[r].bits;
}

int32_t tr_st_dtype_to_tr(const char *name)
{
    int r = tr_st_dtype_order(name);
    return r < 0 ? -1 : st_dtypes[r].tr;
}

const char *tr_st_dtype_from_tr(int32_t dtype)
{
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].tr >= 0 && st_dtypes[i].tr == dtype) return st_dtypes[i].name;
    return NULL;
}

/* ------------------------------------------------------------ the open file */

struct tr_st_file {
    char *path;
    void *map;
    size_t map_len;
    const uint8_t *data;     /* map + 8 + header length */
    json_t *root;
    tr_st_info *infos;
    size_t n;
    size_t *by_name;
    const char **meta_keys;  /* nmeta keys then nmeta values, pointers into root */
    size_t nmeta;
};

void tr_st_close(tr_st_file *f)
{
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    json_decref(f->root);
    free(f->infos);
    free(f->by_name);
    free(f->meta_keys);
    free(f->path);
    free(f);
}

const char *tr_st_path(const tr_st_file *f) { return f->path; }
size_t tr_st_count(const tr_st_file *f) { return f->n; }

int tr_st_get(const tr_st_file *f, size_t i, tr_st_info *out)
{
    if (!f || i >= f->n) return TR_EUSER;
    *out = f->infos[i];
    return TR_OK;
}

int64_t tr_st_find(const tr_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->infos[f->by_name[mid]].name, name);
        if (c == 0) return (int64_t)f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int tr_st_lookup(const tr_st_file *f, const char *name, tr_st_info *out, tr_error *err)
{
    int64_t i = tr_st_find(f, name);
    if (i < 0)
        return tr_fail(err, TR_EUSER,
                       "%s: no tensor named '%s' (the file holds %zu tensors); check the name "
                       "against the checkpoint's keys or the model's expected prefix",
                       f->path, name, f->n);
    *out = f->infos[i];
    return TR_OK;
}

const char *tr_st_metadata(const tr_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_keys[f->nmeta + i];
    return NULL;
}

size_t tr_st_metadata_count(const tr_st_file *f) { return f->nmeta; }

int tr_st_metadata_at(const tr_st_file *f, size_t i, const char **key, const char **value)
{
    if (i >= f->nmeta) return TR_EUSER;
    *key = f->meta_keys[i];
    *value = f->meta_keys[f->nmeta + i];
    return TR_OK;
}

/* ------------------------------------------------------------ validation */

static int cmp_offset(const void *a, const void *b)
{
    const tr_st_info *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* qsort has no context argument in C11, so by_name is built with a small merge sort. */

static void sort_by_name(size_t *idx, size_t *tmp, size_t n, const tr_st_info *infos)
{
    if (n < 2) return;
    size_t h = n / 2;
    sort_by_name(idx, tmp, h, infos);
    sort_by_name(idx + h, tmp, n - h, infos);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = strcmp(infos[idx[i]].name, infos[idx[j]].name) <= 0 ? idx[i++] : idx[j++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/* Reads a non-negative JSON integer; 0 when V is not one. */
static int get_uint(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

/* Checks one tensor entry of the header and fills *info except data/offset; the
 * offsets go to *begin and *end. */
static int parse_entry(tr_st_info *info, uint64_t *begin, uint64_t *end, const char *path,
                       const char *name, json_t *v, tr_error *err)
{
    if (!json_is_object(v))
        return tr_fail(err, TR_EUSER,
                       "%s: tensor '%s': the header entry is not an object with dtype, shape "
                       "and data_offsets; the file is corrupt or not a safetensors file",
                       path, name);
    json_t *dt = json_object_get(v, "dtype");
    json_t *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!dt || !shape || !offs)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': the header entry lacks '%s'; the file "
                       "is corrupt or was written by a broken writer",
                       path, name, !dt ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!json_is_string(dt))
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': dtype is not a string", path, name);
    int rank = tr_st_dtype_order(json_string_value(dt));
    if (rank < 0)
        return tr_fail(err, TR_EUSER,
                       "%s: tensor '%s': unknown dtype '%s' (safetensors knows BOOL, U8, I8, "
                       "I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64, F4, F6_E2M3, "
                       "F6_E3M2, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ)",
                       path, name, json_string_value(dt));
    if (!json_is_array(shape))
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': shape is not an array of integers",
                       path, name);
    size_t ndim = json_array_size(shape);
    if (ndim > 8)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': shape has %zu dimensions; trainer "
                       "handles at most 8", path, name, ndim);
    memset(info, 0, sizeof *info);
    info->name = name;
    info->dtype_name = st_dtypes[rank].name;
    info->dtype = st_dtypes[rank].tr;
    info->ndim = (int32_t)ndim;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t d = 0; d < ndim; d++) {
        uint64_t s;
        if (!get_uint(json_array_get(shape, d), &s))
            return tr_fail(err, TR_EUSER, "%s: tensor '%s': shape[%zu] is not a non-negative "
                           "integer", path, name, d);
        info->shape[d] = (int64_t)s;
        if (!overflow && __builtin_mul_overflow(numel, s, &numel)) overflow = 1;
    }
    uint64_t bits = 0;
    if (overflow || numel > INT64_MAX ||
        __builtin_mul_overflow(numel, (uint64_t)st_dtypes[rank].bits, &bits))
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': its shape's element count times the "
                       "dtype size overflows 64 bits; the shape is corrupt", path, name);
    if (bits % 8 != 0)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': %llu elements of %s (%d bits each) "
                       "are not a whole number of bytes", path, name,
                       (unsigned long long)numel, st_dtypes[rank].name, st_dtypes[rank].bits);
    info->numel = (int64_t)numel;
    info->nbytes = (size_t)(bits / 8);
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !get_uint(json_array_get(offs, 0), begin) || !get_uint(json_array_get(offs, 1), end))
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': data_offsets is not a pair of "
                       "non-negative integers [begin, end]", path, name);
    if (*end < *begin)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': data_offsets [%llu, %llu] end before "
                       "they begin", path, name, (unsigned long long)*begin,
                       (unsigned long long)*end);
    if (*end - *begin != bits / 8)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': shape and dtype %s make %llu bytes "
                       "but data_offsets [%llu, %llu] hold %llu", path, name,
                       st_dtypes[rank].name, (unsigned long long)(bits / 8),
                       (unsigned long long)*begin, (unsigned long long)*end,
                       (unsigned long long)(*end - *begin));
    return TR_OK;
}

static int parse_metadata(tr_st_file *f, json_t *meta, tr_error *err)
{
    if (json_is_null(meta)) return TR_OK;
    if (!json_is_object(meta))
        return tr_fail(err, TR_EUSER, "%s: __metadata__ is not an object of strings", f->path);
    size_t n = json_object_size(meta);
    f->meta_keys = calloc(2 * n + 1, sizeof *f->meta_keys);
    if (!f->meta_keys) return tr_fail(err, TR_EOOM, "%s: out of host memory", f->path);
    const char *key;
    json_t *v;
    size_t i = 0;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v))
            return tr_fail(err, TR_EUSER, "%s: __metadata__ value for '%s' is not a string "
                           "(safetensors metadata maps strings to strings)", f->path, key);
        f->meta_keys[i] = key;
        f->meta_keys[n + i] = json_string_value(v);
        i++;
    }
    f->nmeta = n;
    return TR_OK;
}

/* Everything after the mapping exists: header checks, JSON, entries, tiling. */
static int parse_header(tr_st_file *f, tr_error *err)
{
    const uint8_t *m = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | m[i];
    if (hlen > ST_MAX_HEADER)
        return tr_fail(err, TR_EUSER, "%s: the header length field says %llu bytes, above the "
                       "format's limit of 100000000; this is not a safetensors file or it is "
                       "corrupt", f->path, (unsigned long long)hlen);
    if (8 + hlen > f->map_len)
        return tr_fail(err, TR_EUSER, "%s: the file is %zu bytes but its header claims %llu "
                       "bytes after the 8-byte length (truncated download?)", f->path,
                       f->map_len, (unsigned long long)hlen);
    const uint8_t *h = m + 8;
    size_t pos = 0;
    while (pos < hlen) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(h + pos, (utf8proc_ssize_t)(hlen - pos), &cp);
        if (k <= 0)
            return tr_fail(err, TR_EUSER, "%s: the header is not valid UTF-8 (byte %zu of the "
                           "header); the file is corrupt", f->path, pos);
        pos += (size_t)k;
    }
    size_t first = 0;   /* the reference reader allows JSON whitespace before the '{' */
    while (first < hlen && (h[first] == ' ' || h[first] == '\t' || h[first] == '\n' ||
                            h[first] == '\r'))
        first++;
    if (first == hlen || h[first] != '{')
        return tr_fail(err, TR_EUSER, "%s: the header does not start with '{'; this is not a "
                       "safetensors file or it is corrupt", f->path);
    json_error_t je;
    f->root = json_loadb((const char *)h, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!f->root)
        return tr_fail(err, TR_EUSER, "%s: the header is not valid JSON: %s (at byte %d of the "
                       "header)", f->path, je.text, je.position);
    if (!json_is_object(f->root))
        return tr_fail(err, TR_EUSER, "%s: the header is not a JSON object", f->path);
    f->data = h + hlen;
    size_t data_len = f->map_len - 8 - (size_t)hlen;

    size_t n = json_object_size(f->root);
    f->infos = calloc(n + 1, sizeof *f->infos);
    if (!f->infos) return tr_fail(err, TR_EOOM, "%s: out of host memory", f->path);
    const char *key;
    json_t *v;
    json_object_foreach(f->root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            int rc = parse_metadata(f, v, err);
            if (rc) return rc;
            continue;
        }
        uint64_t begin, end;
        tr_st_info *info = &f->infos[f->n];
        int rc = parse_entry(info, &begin, &end, f->path, key, v, err);
        if (rc) return rc;
        info->offset = begin;   /* relative until the tiling is checked */
        f->n++;
    }
    qsort(f->infos, f->n, sizeof *f->infos, cmp_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        tr_st_info *t = &f->infos[i];
        if (t->offset != at) {
            if (i == 0)
                return tr_fail(err, TR_EUSER, "%s: tensor '%s': data_offsets [%llu, %llu] do "
                               "not start at 0 (the first tensor's data must begin the data "
                               "area)", f->path, t->name, (unsigned long long)t->offset,
                               (unsigned long long)(t->offset + t->nbytes));
            return tr_fail(err, TR_EUSER, "%s: tensor '%s': data_offsets [%llu, %llu] do not "
                           "follow the previous tensor's end %llu (tensor '%s'); %s", f->path,
                           t->name, (unsigned long long)t->offset,
                           (unsigned long long)(t->offset + t->nbytes),
                           (unsigned long long)at, f->infos[i - 1].name,
                           t->offset < at ? "tensors overlap" : "there is a gap");
        }
        at += t->nbytes;
    }
    if (at != data_len)
        return tr_fail(err, TR_EUSER, "%s: the file is %zu bytes but the header says the data "
                       "ends at %llu (8 + header %llu + data %llu)%s", f->path, f->map_len,
                       (unsigned long long)(8 + hlen + at), (unsigned long long)hlen,
                       (unsigned long long)at,
                       at > data_len ? " (truncated download?)"
                                     : "; bytes follow the last tensor (corrupt file?)");
    for (size_t i = 0; i < f->n; i++) {
        f->infos[i].data = f->data + f->infos[i].offset;
        f->infos[i].offset += 8 + hlen;
    }
    f->by_name = malloc((f->n + 1) * sizeof *f->by_name);
    size_t *tmp = malloc((f->n + 1) * sizeof *tmp);
    if (!f->by_name || !tmp) {
        free(tmp);
        return tr_fail(err, TR_EOOM, "%s: out of host memory", f->path);
    }
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = i;
    sort_by_name(f->by_name, tmp, f->n, f->infos);
    free(tmp);
    return TR_OK;
}

/* ------------------------------------------------------------ open */

int tr_st_open(tr_st_file **out, const char *path, tr_error *err)
{
    *out = NULL;
    tr_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return tr_fail(err, TR_EOOM, "%s: out of host memory opening a safetensors file", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        tr_st_close(f);
        return tr_fail(err, TR_EUSER, "%s: cannot open: %s; check the path", path, strerror(e));
    }
    struct stat st;
    int rc = TR_OK;
    if (fstat(fd, &st) != 0) {
        rc = tr_fail(err, TR_EINTERNAL, "%s: fstat failed: %s (%s:%d)", path, strerror(errno),
                     __FILE__, __LINE__);
    } else if (!S_ISREG(st.st_mode)) {
        rc = tr_fail(err, TR_EUSER, "%s: not a regular file; give the path of a .safetensors "
                     "file", path);
    } else if (st.st_size < 8) {
        rc = tr_fail(err, TR_EUSER, "%s: the file is %lld bytes, shorter than the 8-byte header "
                     "length every safetensors file starts with (truncated or empty file?)",
                     path, (long long)st.st_size);
    } else {
        f->map_len = (size_t)st.st_size;
        f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            rc = tr_fail(err, TR_EINTERNAL, "%s: mmap of %zu bytes failed: %s (%s:%d)", path,
                         f->map_len, strerror(errno), __FILE__, __LINE__);
        }
    }
    close(fd);
    if (rc == TR_OK) rc = parse_header(f, err);
    if (rc != TR_OK) {
        tr_st_close(f);
        return rc;
    }
    *out = f;
    return TR_OK;
}
