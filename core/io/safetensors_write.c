/* safetensors_write.c — writing safetensors files (single and sharded) byte-identical to
 * the reference writer, atomically.
 *
 * Byte layout as the reference (Rust `safetensors`, used by the Python package) writes
 * it: tensors sorted by dtype from the last to the first of its Dtype enum, then by name
 * in byte order; data offsets contiguous from 0 in that order; header JSON compact
 * ("__metadata__" first, then the tensors in data order, each as
 * {"dtype","shape","data_offsets"}), control characters in names escaped as \u00xx with
 * lowercase hex (serde_json's spelling), padded with spaces to a multiple of 8 bytes.
 * The reference keeps metadata in a hash map, so with more than one metadata key its order
 * (and only that) is not reproducible; here it is "format" first, then the order given.
 *
 * Atomicity: every file is written to PATH.tmp, flushed and fsync'ed, then renamed over
 * PATH; any failure removes PATH.tmp, so PATH is either the old file or the complete new
 * one. */
#include "safetensors.h"
#include "path_join.h"
#include "tensor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ atomic files */

typedef struct atomic_file {
    const char *path;
    char *tmp;
    FILE *fp;
} atomic_file;

/* Checks a system call's result; on failure records the statement, file and line and
 * jumps to the function's `fail` label. */
#define SYS_CHECK(cond, af)                                                                  \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            rc = tr_fail(err, TR_EINTERNAL, "%s: writing failed: `%s`: %s (%s:%d); check free " \
                         "disk space and permissions", (af)->path, #cond, strerror(errno),   \
                         __FILE__, __LINE__);                                                \
            goto fail;                                                                       \
        }                                                                                    \
    } while (0)

static int af_open(atomic_file *af, const char *path, tr_error *err)
{
    af->path = path;
    af->fp = NULL;
    size_t len = strlen(path);
    af->tmp = malloc(len + 5);
    if (!af->tmp) return tr_fail(err, TR_EOOM, "%s: out of host memory", path);
    memcpy(af->tmp, path, len);
    memcpy(af->tmp + len, ".tmp", 5);
    af->fp = fopen(af->tmp, "wb");
    if (!af->fp) {
        int e = errno;
        free(af->tmp);
        af->tmp = NULL;
        return tr_fail(err, TR_EUSER, "%s: cannot create %s.tmp: %s; check that the folder "
                       "exists and is writable", path, path, strerror(e));
    }
    return TR_OK;
}

static void af_abort(atomic_file *af)
{
    if (af->fp) fclose(af->fp);
    if (af->tmp) unlink(af->tmp);
    free(af->tmp);
    af->fp = NULL;
    af->tmp = NULL;
}

static int af_write(atomic_file *af, const void *p, size_t n, tr_error *err)
{
    int rc = TR_OK;
    if (n) SYS_CHECK(fwrite(p, 1, n, af->fp) == n, af);
    return TR_OK;
fail:
    return rc;
}

/* Flushes, fsyncs, closes and renames; aborts (removing the tmp file) on any failure. */
static int af_commit(atomic_file *af, tr_error *err)
{
    int rc = TR_OK;
    SYS_CHECK(fflush(af->fp) == 0, af);
    SYS_CHECK(fsync(fileno(af->fp)) == 0, af);
    FILE *fp = af->fp;
    af->fp = NULL;
    SYS_CHECK(fclose(fp) == 0, af);
    SYS_CHECK(rename(af->tmp, af->path) == 0, af);
    free(af->tmp);
    af->tmp = NULL;
    /* Make the rename itself durable: fsync the folder (some file systems refuse). */
    const char *slash = strrchr(af->path, '/');
    char *dir = slash ? strndup(af->path, (size_t)(slash - af->path) + (slash == af->path))
                      : strdup(".");
    if (dir) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
                rc = tr_fail(err, TR_EINTERNAL, "%s: fsync of folder %s failed: %s (%s:%d)",
                             af->path, dir, strerror(errno), __FILE__, __LINE__);
            }
            close(fd);
        }
        free(dir);
    }
    return rc;
fail:
    af_abort(af);
    return rc;
}

/* ------------------------------------------------------------ entries */

static int cmp_name(const void *a, const void *b)
{
    const tr_st_entry *x = *(const tr_st_entry *const *)a, *y = *(const tr_st_entry *const *)b;
    return strcmp(x->name, y->name);
}

/* The reference order: dtype rank descending, then name ascending. */
static int cmp_reference(const void *a, const void *b)
{
    const tr_st_entry *x = *(const tr_st_entry *const *)a, *y = *(const tr_st_entry *const *)b;
    int rx = tr_st_dtype_order(x->dtype), ry = tr_st_dtype_order(y->dtype);
    if (rx != ry) return rx > ry ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Checks one entry and returns its byte count in *nbytes. */
static int check_entry(const tr_st_entry *e, size_t i, const char *path, uint64_t *nbytes,
                       tr_error *err)
{
    if (!e->name || !e->name[0])
        return tr_fail(err, TR_EUSER, "%s: entry %zu has no name", path, i);
    if (strcmp(e->name, "__metadata__") == 0)
        return tr_fail(err, TR_EUSER, "%s: a tensor cannot be called '__metadata__' (the "
                       "format reserves that key)", path);
    int32_t bits = tr_st_dtype_bits(e->dtype);
    if (bits == 0)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': unknown safetensors dtype '%s' (use "
                       "F32, BF16, F16, I64, I32, ...; tr_st_dtype_from_tr converts)", path,
                       e->name, e->dtype ? e->dtype : "(null)");
    if (e->ndim < 0 || e->ndim > 8)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': ndim %d is outside 0..8", path,
                       e->name, e->ndim);
    uint64_t numel = 1, total = 0;
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] < 0)
            return tr_fail(err, TR_EUSER, "%s: tensor '%s': shape[%d] = %lld is negative",
                           path, e->name, d, (long long)e->shape[d]);
        if (__builtin_mul_overflow(numel, (uint64_t)e->shape[d], &numel))
            return tr_fail(err, TR_EUSER, "%s: tensor '%s': the shape's element count "
                           "overflows", path, e->name);
    }
    if (__builtin_mul_overflow(numel, (uint64_t)bits, &total) || total / 8 > SIZE_MAX / 2)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': the byte count overflows", path,
                       e->name);
    if (total % 8)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': %llu elements of %s are not a whole "
                       "number of bytes", path, e->name, (unsigned long long)numel, e->dtype);
    if (total && !e->data)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': data is NULL", path, e->name);
    *nbytes = total / 8;
    return TR_OK;
}

/* Sorted copies of the entry pointers; checks entries, names' uniqueness. */
static int order_entries(const tr_st_entry ***out, const tr_st_entry *entries, size_t n,
                         const char *path, tr_error *err)
{
    const tr_st_entry **p = malloc((n + 1) * sizeof *p);
    if (!p) return tr_fail(err, TR_EOOM, "%s: out of host memory", path);
    int rc = TR_OK;
    for (size_t i = 0; i < n && rc == TR_OK; i++) {
        uint64_t nb;
        rc = check_entry(&entries[i], i, path, &nb, err);
        p[i] = &entries[i];
    }
    if (rc == TR_OK) {
        qsort(p, n, sizeof *p, cmp_name);
        for (size_t i = 1; i < n; i++)
            if (strcmp(p[i - 1]->name, p[i]->name) == 0) {
                rc = tr_fail(err, TR_EUSER, "%s: two tensors are called '%s'; names must be "
                             "distinct", path, p[i]->name);
                break;
            }
    }
    if (rc != TR_OK) {
        free(p);
        return rc;
    }
    qsort(p, n, sizeof *p, cmp_reference);
    *out = p;
    return TR_OK;
}

static uint64_t entry_nbytes(const tr_st_entry *e)
{
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
    return numel * (uint64_t)tr_st_dtype_bits(e->dtype) / 8;
}

/* ------------------------------------------------------------ header */

/* jansson writes \u001B; serde_json (the reference) writes \u001b. */
static void lowercase_unicode_escapes(char *s)
{
    for (; *s; s++) {
        if (*s != '\\') continue;
        s++;
        if (*s == 'u')
            for (int k = 1; k <= 4 && s[k]; k++)
                if (s[k] >= 'A' && s[k] <= 'F') s[k] = (char)(s[k] - 'A' + 'a');
        if (!*s) break;
    }
}

#define JSON_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            rc = tr_fail(err, TR_EOOM, "%s: building the header failed: `%s` (%s:%d)", path, \
                         #cond, __FILE__, __LINE__);                                         \
            goto fail;                                                                       \
        }                                                                                    \
    } while (0)

/* The header JSON (not yet padded) for entries already in reference order. */
static int build_header(char **out, const tr_st_entry *const *p, size_t n,
                        const char *const *metadata, size_t n_metadata, const char *path,
                        tr_error *err)
{
    int rc = TR_OK;
    json_t *root = json_object(), *meta = json_object();
    JSON_CHECK(root && meta);
    JSON_CHECK(json_object_set_new(meta, "format", json_string("pt")) == 0);
    for (size_t i = 0; i < n_metadata; i++) {
        const char *k = metadata[2 * i], *v = metadata[2 * i + 1];
        json_t *js = v ? json_string(v) : NULL;
        if (!k || !js || json_object_set_new(meta, k, js) != 0) {
            rc = tr_fail(err, TR_EUSER, "%s: metadata pair %zu ('%s') is not a pair of valid "
                         "UTF-8 strings", path, i, k ? k : "(null)");
            goto fail;
        }
    }
    JSON_CHECK(json_object_set_new(root, "__metadata__", meta) == 0);
    meta = NULL;
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const tr_st_entry *e = p[i];
        uint64_t nb = entry_nbytes(e);
        json_t *t = json_object(), *shape = json_array(), *offs = json_array();
        int ok = t && shape && offs;
        for (int d = 0; ok && d < e->ndim; d++)
            ok = json_array_append_new(shape, json_integer(e->shape[d])) == 0;
        ok = ok && json_array_append_new(offs, json_integer((json_int_t)at)) == 0 &&
             json_array_append_new(offs, json_integer((json_int_t)(at + nb))) == 0 &&
             json_object_set_new(t, "dtype", json_string(e->dtype)) == 0 &&
             json_object_set(t, "shape", shape) == 0 &&
             json_object_set(t, "data_offsets", offs) == 0;
        json_decref(shape);
        json_decref(offs);
        if (!ok) {
            json_decref(t);
            JSON_CHECK(ok);
        }
        if (json_object_set_new(root, e->name, t) != 0) {
            rc = tr_fail(err, TR_EUSER, "%s: tensor name '%s' is not valid UTF-8", path,
                         e->name);
            goto fail;
        }
        at += nb;
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    JSON_CHECK(s);
    lowercase_unicode_escapes(s);
    *out = s;
fail:
    json_decref(meta);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------ write */

/* Entry e's bytes from tensor t (any device), a chunk at a time through buf. */
static int write_from_tensor(atomic_file *af, tr_ctx *ctx, const tr_st_entry *e, const tr_tensor *t, void *buf,
                             size_t chunk, tr_error *err)
{
    size_t nbytes = (size_t)entry_nbytes(e);
    if (tr_tensor_nbytes(t) != nbytes)
        return tr_fail(err, TR_EUSER, "%s: tensor '%s': the entry describes %zu bytes but its tensor holds %zu",
                       af->path, e->name, nbytes, tr_tensor_nbytes(t));
    for (size_t off = 0; off < nbytes;) {
        size_t cnt = nbytes - off < chunk ? nbytes - off : chunk;
        if (tr_tensor_read_range(ctx, t, off, buf, cnt) != TR_OK)
            return tr_fail(err, TR_EINTERNAL, "%s: tensor '%s': reading it to write failed: %s", af->path, e->name,
                           tr_ctx_errmsg(ctx));
        int rc = af_write(af, buf, cnt, err);
        if (rc != TR_OK) return rc;
        off += cnt;
    }
    return TR_OK;
}

int tr_st_write(const char *path, const tr_st_entry *entries, size_t n,
                const char *const *metadata, size_t n_metadata, tr_error *err)
{
    return tr_st_write_tensors(NULL, path, entries, NULL, n, metadata, n_metadata, err);
}

int tr_st_write_tensors(struct tr_ctx *ctx, const char *path, const tr_st_entry *entries,
                        const struct tr_tensor *const *tensors, size_t n, const char *const *metadata,
                        size_t n_metadata, tr_error *err)
{
    const tr_st_entry **p = NULL;
    char *header = NULL;
    int rc = order_entries(&p, entries, n, path, err);
    if (rc) return rc;
    rc = build_header(&header, p, n, metadata, n_metadata, path, err);
    if (rc) {
        free(p);
        return rc;
    }
    size_t hlen = strlen(header);
    size_t pad = (8 - hlen % 8) % 8;
    uint64_t total = hlen + pad;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(total >> (8 * i));
    static const char spaces[8] = "        ";

    atomic_file af;
    rc = af_open(&af, path, err);
    if (rc == TR_OK) rc = af_write(&af, le, 8, err);
    if (rc == TR_OK) rc = af_write(&af, header, hlen, err);
    if (rc == TR_OK) rc = af_write(&af, spaces, pad, err);
    /* a tensor-sourced entry is copied through one bounded buffer (element-aligned: the
     * chunk is a multiple of 8 bytes) */
    enum { TENSOR_CHUNK = 8 << 20 };
    void *buf = NULL;
    for (size_t i = 0; i < n && rc == TR_OK; i++) {
        const tr_tensor *t = tensors ? tensors[p[i] - entries] : NULL;
        if (!t) {
            rc = af_write(&af, p[i]->data, (size_t)entry_nbytes(p[i]), err);
            continue;
        }
        if (!ctx) {
            rc = tr_fail(err, TR_EUSER, "%s: tensor '%s' comes from a tensor but no context was given", path,
                         p[i]->name);
            break;
        }
        if (!buf && !(buf = malloc(TENSOR_CHUNK))) {
            rc = tr_fail(err, TR_EOOM, "%s: out of host memory for an 8 MiB write buffer", path);
            break;
        }
        rc = write_from_tensor(&af, ctx, p[i], t, buf, TENSOR_CHUNK, err);
    }
    free(buf);
    if (rc == TR_OK) rc = af_commit(&af, err);
    else af_abort(&af);
    free(header);
    free(p);
    return rc;
}

/* ------------------------------------------------------------ sharded write */

/* After a save into DIR, removes what a previous save left there and a reader could mix
 * in: with NSHARDS == 0 (a single model.safetensors) the index and every shard; otherwise
 * model.safetensors and the shards not of the form model-*-of-NSHARDS (as transformers'
 * save_pretrained cleans the folder). */
static int remove_stale(const char *dir, size_t nshards, tr_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return tr_fail(err, TR_EINTERNAL, "%s: opendir failed: %s (%s:%d)", dir, strerror(errno),
                       __FILE__, __LINE__);
    char keep[32];
    snprintf(keep, sizeof keep, "-of-%05zu.safetensors", nshards);
    int rc = TR_OK;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && rc == TR_OK) {
        const char *name = ent->d_name;
        size_t len = strlen(name);
        int shard = strncmp(name, "model-", 6) == 0 && len > 18 &&
                    strcmp(name + len - 12, ".safetensors") == 0;
        int stale = nshards == 0 ? shard || strcmp(name, "model.safetensors.index.json") == 0
                                 : strcmp(name, "model.safetensors") == 0 ||
                                       (shard && (len < strlen(keep) ||
                                                  strcmp(name + len - strlen(keep), keep) != 0));
        if (!stale) continue;
        char *path = tr_path_join(dir, name);
        if (!path) rc = tr_fail(err, TR_EOOM, "%s: out of host memory", dir);
        else if (unlink(path) != 0 && errno != ENOENT)
            rc = tr_fail(err, TR_EINTERNAL, "%s: removing the stale %s failed: %s (%s:%d)", dir,
                         name, strerror(errno), __FILE__, __LINE__);
        free(path);
    }
    closedir(d);
    return rc;
}

int tr_st_write_sharded(const char *dir, const tr_st_entry *entries, size_t n,
                        const char *const *metadata, size_t n_metadata, uint64_t max_shard_bytes,
                        tr_error *err)
{
    if (max_shard_bytes == 0)
        return tr_fail(err, TR_EUSER, "%s: max_shard_bytes must be positive", dir);
    const tr_st_entry **sorted = NULL;
    int rc0 = order_entries(&sorted, entries, n, dir, err);   /* checks every entry, names */
    if (rc0) return rc0;
    free(sorted);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += entry_nbytes(&entries[i]);
    if (total <= max_shard_bytes) {
        char *path = tr_path_join(dir, "model.safetensors");
        if (!path) return tr_fail(err, TR_EOOM, "%s: out of host memory", dir);
        int rc = tr_st_write(path, entries, n, metadata, n_metadata, err);
        free(path);
        if (rc == TR_OK) rc = remove_stale(dir, 0, err);
        return rc;
    }

    /* huggingface_hub's split: in entry order, a tensor above the limit gets a shard of
     * its own at once; otherwise a new shard starts when the next tensor would pass it. */
    size_t *shard_of = malloc((n + 1) * sizeof *shard_of);
    tr_st_entry *buf = malloc((n + 1) * sizeof *buf);
    json_t *index = json_object(), *wmap = json_object();
    int rc = TR_OK;
    if (!shard_of || !buf || !index || !wmap) {
        rc = tr_fail(err, TR_EOOM, "%s: out of host memory", dir);
        goto done;
    }
    size_t nshards = 0, current = (size_t)-1;
    uint64_t current_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t nb = entry_nbytes(&entries[i]);
        if (nb > max_shard_bytes) {
            shard_of[i] = nshards++;
            continue;
        }
        if (current == (size_t)-1 || current_bytes + nb > max_shard_bytes) {
            current = nshards++;
            current_bytes = 0;
        }
        shard_of[i] = current;
        current_bytes += nb;
    }
    for (size_t s = 0; s < nshards && rc == TR_OK; s++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, nshards);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (shard_of[i] != s) continue;
            buf[m++] = entries[i];
            json_t *js = json_string(name);
            if (!js || json_object_set_new(wmap, entries[i].name, js) != 0)
                rc = tr_fail(err, TR_EUSER, "%s: tensor name '%s' is not valid UTF-8", dir,
                             entries[i].name);
        }
        char *path = tr_path_join(dir, name);
        if (!path) rc = tr_fail(err, TR_EOOM, "%s: out of host memory", dir);
        if (rc == TR_OK) rc = tr_st_write(path, buf, m, metadata, n_metadata, err);
        free(path);
    }
    if (rc != TR_OK) goto done;
    json_t *meta = json_pack("{s:I}", "total_size", (json_int_t)total);
    if (!meta || json_object_set_new(index, "metadata", meta) != 0 ||
        json_object_set(index, "weight_map", wmap) != 0) {
        rc = tr_fail(err, TR_EOOM, "%s: out of host memory building the index", dir);
        goto done;
    }
    char *text = json_dumps(index, JSON_INDENT(2) | JSON_SORT_KEYS);
    char *path = tr_path_join(dir, "model.safetensors.index.json");
    if (!text || !path) {
        rc = tr_fail(err, TR_EOOM, "%s: out of host memory writing the index", dir);
    } else {
        atomic_file af;
        rc = af_open(&af, path, err);
        if (rc == TR_OK) rc = af_write(&af, text, strlen(text), err);
        if (rc == TR_OK) rc = af_write(&af, "\n", 1, err);
        if (rc == TR_OK) rc = af_commit(&af, err);
        else af_abort(&af);
    }
    free(text);
    free(path);
    if (rc == TR_OK) rc = remove_stale(dir, nshards, err);
done:
    json_decref(wmap);
    json_decref(index);
    free(buf);
    free(shard_of);
    return rc;
}
