/* safetensors_index.c — sharded checkpoints: a folder whose
 * model.safetensors.index.json maps every tensor name to the shard file holding it
 * ({"metadata": {...}, "weight_map": {name: file}}), read as one set of tensors.
 *
 * Invariants of an open tr_st_sharded: every shard named by the weight map is open exactly
 * once (shards[] in order of first mention); every listed tensor exists in its shard;
 * `sorted` holds the listed tensors ordered by name for binary search; `index` (the
 * parsed JSON) owns the names. A folder without an index is one shard, model.safetensors. */
#include "safetensors.h"
#include "path_join.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct st_ref {
    const char *name;
    size_t shard;
    size_t idx;      /* in the shard */
    size_t pos;      /* in weight-map order */
} st_ref;

struct tr_st_sharded {
    char *source;    /* the path it was opened from, for messages */
    json_t *index;
    tr_st_file **shards;
    size_t nshards;
    st_ref *refs;    /* weight-map order */
    st_ref *sorted;  /* by name */
    size_t n;
};

/* ------------------------------------------------------------ queries */

void tr_st_sharded_close(tr_st_sharded *s)
{
    if (!s) return;
    for (size_t k = 0; k < s->nshards; k++) tr_st_close(s->shards[k]);
    free(s->shards);
    free(s->refs);
    free(s->sorted);
    json_decref(s->index);
    free(s->source);
    free(s);
}

size_t tr_st_sharded_count(const tr_st_sharded *s) { return s->n; }
size_t tr_st_sharded_nshards(const tr_st_sharded *s) { return s->nshards; }

const tr_st_file *tr_st_sharded_shard(const tr_st_sharded *s, size_t k)
{
    return k < s->nshards ? s->shards[k] : NULL;
}

static int ref_info(const tr_st_sharded *s, const st_ref *r, tr_st_info *out)
{
    int rc = tr_st_get(s->shards[r->shard], r->idx, out);
    if (rc == TR_OK) out->shard = (int32_t)r->shard;
    return rc;
}

int tr_st_sharded_get(const tr_st_sharded *s, size_t i, tr_st_info *out)
{
    if (!s || i >= s->n) return TR_EUSER;
    return ref_info(s, &s->refs[i], out);
}

static const st_ref *find_ref(const tr_st_sharded *s, const char *name)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->sorted[mid].name, name);
        if (c == 0) return &s->sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int64_t tr_st_sharded_find(const tr_st_sharded *s, const char *name)
{
    const st_ref *r = find_ref(s, name);
    return r ? (int64_t)r->pos : -1;
}

int tr_st_sharded_lookup(const tr_st_sharded *s, const char *name, tr_st_info *out, tr_error *err)
{
    const st_ref *r = find_ref(s, name);
    if (!r)
        return tr_fail(err, TR_EUSER, "%s: no tensor named '%s' in this checkpoint (%zu tensors "
                       "in %zu shards); check the name against the checkpoint's keys",
                       s->source, name, s->n, s->nshards);
    return ref_info(s, r, out);
}

/* ------------------------------------------------------------ open */

static int cmp_ref_name(const void *a, const void *b)
{
    return strcmp(((const st_ref *)a)->name, ((const st_ref *)b)->name);
}

/* A shard name must stay inside the folder: relative, with no ".." component. */
static int shard_name_ok(const char *f)
{
    if (!f[0] || f[0] == '/') return 0;
    for (const char *p = f; *p;) {
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return 0;
        p += len + (q != NULL);
    }
    return 1;
}

static int build_sorted(tr_st_sharded *s, tr_error *err)
{
    s->sorted = malloc((s->n + 1) * sizeof *s->sorted);
    if (!s->sorted) return tr_fail(err, TR_EOOM, "out of host memory opening a checkpoint");
    memcpy(s->sorted, s->refs, s->n * sizeof *s->sorted);
    qsort(s->sorted, s->n, sizeof *s->sorted, cmp_ref_name);
    return TR_OK;
}

/* One file as the only shard, every tensor listed in file order. */
static int open_single(tr_st_sharded *s, const char *path, tr_error *err)
{
    s->shards = calloc(1, sizeof *s->shards);
    if (!s->shards) return tr_fail(err, TR_EOOM, "%s: out of host memory", path);
    int rc = tr_st_open(&s->shards[0], path, err);
    if (rc) return rc;
    s->nshards = 1;
    size_t n = tr_st_count(s->shards[0]);
    s->refs = malloc((n + 1) * sizeof *s->refs);
    if (!s->refs) return tr_fail(err, TR_EOOM, "%s: out of host memory", path);
    for (size_t i = 0; i < n; i++) {
        tr_st_info info;
        tr_st_get(s->shards[0], i, &info);
        s->refs[i] = (st_ref){ info.name, 0, i, i };
    }
    s->n = n;
    return build_sorted(s, err);
}

static int open_index(tr_st_sharded *s, const char *index_path, const char *dir, tr_error *err)
{
    json_error_t je;
    s->index = json_load_file(index_path, JSON_REJECT_DUPLICATES, &je);
    if (!s->index)
        return tr_fail(err, TR_EUSER, "%s: not a valid index: %s (line %d, column %d)",
                       index_path, je.text, je.line, je.column);
    json_t *wmap = json_is_object(s->index) ? json_object_get(s->index, "weight_map") : NULL;
    if (!json_is_object(wmap))
        return tr_fail(err, TR_EUSER, "%s: no \"weight_map\" object (tensor name -> shard "
                       "file); the index is corrupt", index_path);
    size_t n = json_object_size(wmap);
    s->refs = malloc((n + 1) * sizeof *s->refs);
    s->shards = malloc((n + 1) * sizeof *s->shards);
    if (!s->refs || !s->shards) return tr_fail(err, TR_EOOM, "%s: out of host memory", index_path);
    const char *name;
    json_t *v;
    json_object_foreach(wmap, name, v) {
        const char *file = json_string_value(v);
        if (!file || !shard_name_ok(file))
            return tr_fail(err, TR_EUSER, "%s: weight_map entry for tensor '%s' is not a shard "
                           "file name inside the folder", index_path, name);
        size_t k = 0;
        while (k < s->nshards && strcmp(tr_st_path(s->shards[k]) + strlen(dir) + 1, file) != 0)
            k++;
        if (k == s->nshards) {
            char *path = tr_path_join(dir, file);
            if (!path) return tr_fail(err, TR_EOOM, "%s: out of host memory", index_path);
            tr_error inner;
            tr_error_clear(&inner);
            int rc = tr_st_open(&s->shards[k], path, &inner);
            free(path);
            if (rc)
                return tr_fail(err, rc, "%s: shard '%s' (holding tensor '%s') cannot be used: "
                               "%s", index_path, file, name, inner.msg);
            s->nshards++;
        }
        int64_t idx = tr_st_find(s->shards[k], name);
        if (idx < 0)
            return tr_fail(err, TR_EUSER, "%s: the weight_map puts tensor '%s' in shard '%s', "
                           "but that shard has no such tensor; the index and the shards do "
                           "not belong together", index_path, name, file);
        s->refs[s->n] = (st_ref){ name, k, (size_t)idx, s->n };
        s->n++;
    }
    return build_sorted(s, err);
}

int tr_st_sharded_open(tr_st_sharded **out, const char *path, tr_error *err)
{
    *out = NULL;
    tr_st_sharded *s = calloc(1, sizeof *s);
    if (!s || !(s->source = strdup(path))) {
        free(s);
        return tr_fail(err, TR_EOOM, "%s: out of host memory", path);
    }
    struct stat st;
    int rc;
    if (stat(path, &st) != 0) {
        rc = tr_fail(err, TR_EUSER, "%s: cannot open: %s; give a model folder, an "
                     "index.json or a .safetensors file", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        char *index = tr_path_join(path, "model.safetensors.index.json");
        char *single = tr_path_join(path, "model.safetensors");
        struct stat ist;
        if (!index || !single) rc = tr_fail(err, TR_EOOM, "%s: out of host memory", path);
        else if (stat(index, &ist) == 0) rc = open_index(s, index, path, err);
        else if (stat(single, &ist) == 0) rc = open_single(s, single, err);
        else
            rc = tr_fail(err, TR_EUSER, "%s: the folder has neither model.safetensors.index.json "
                         "nor model.safetensors; is it a Hugging Face model folder?", path);
        free(index);
        free(single);
    } else {
        size_t len = strlen(path);
        if (len >= 5 && strcmp(path + len - 5, ".json") == 0) {
            const char *slash = strrchr(path, '/');
            char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
            rc = dir ? open_index(s, path, dir, err)
                     : tr_fail(err, TR_EOOM, "%s: out of host memory", path);
            free(dir);
        } else {
            rc = open_single(s, path, err);
        }
    }
    if (rc) {
        tr_st_sharded_close(s);
        return rc;
    }
    *out = s;
    return TR_OK;
}
