/* alloc_report.c — what the caching allocator tells people: the out-of-memory message
 * (one paragraph with the ledger and what shrinks which tag, then a table), the
 * human-readable report, and the JSON snapshot (segments, blocks, recent events),
 * written atomically: path.tmp, fsync, rename; and the reads behind them (stats, the largest
 * free block, event names). Reads allocator state only, through alloc_internal.h: alloc.c
 * calls this file (for the OOM message), never the other way. */
#include "alloc_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ reading the state */

uint64_t tr_alloc_largest_free(const tr_alloc *a)
{
    uint64_t m = 0;
    for (int p = 0; p < 2; p++)
        if (a->free_tree[p] && a->free_tree[p]->sub_max > m) m = a->free_tree[p]->sub_max;
    return m;
}

void tr_alloc_get_stats(const tr_alloc *a, tr_alloc_stats *out)
{
    *out = a->st;
    out->largest_free = tr_alloc_largest_free(a);
    out->limit = a->limit;
    out->max_split_size = a->max_split_size;
}

const char *tr_alloc_event_name(int kind)
{
    static const char *const names[TR_EV_KINDS] = { "alloc", "free", "raw_alloc", "raw_free", "oom" };
    return kind >= 0 && kind < TR_EV_KINDS ? names[kind] : "?";
}

/* ------------------------------------------------------------ formatting */

const char *tr_alloc_fmt_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 3) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

/* Appends to a fixed buffer, always NUL-terminated, counting what the whole text needs. */
typedef struct text {
    char *buf;
    size_t cap, need;
} text;

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->need < t->cap ? t->cap - t->need : 0;
    int n = vsnprintf(room ? t->buf + t->need : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->need += (size_t)n;
}

/* The table of current and peak bytes: one row a tag, then allocated and reserved, each
 * row after `indent` in columns w wide; the last row ends without a newline. */
static void put_tag_table(text *t, const tr_alloc_stats *st, const char *indent, int w)
{
    char s1[32], s2[32];
    put(t, "%s%-*s %*s %*s\n", indent, w, "tag", w, "current", w, "peak");
    for (int i = 0; i < TR_NTAGS; i++)
        put(t, "%s%-*s %*s %*s\n", indent, w, tr_tag_name(i), w, tr_alloc_fmt_size(st->tag_allocated[i], s1, sizeof s1),
            w, tr_alloc_fmt_size(st->tag_peak[i], s2, sizeof s2));
    put(t, "%s%-*s %*s %*s\n", indent, w, "allocated", w, tr_alloc_fmt_size(st->allocated, s1, sizeof s1), w,
        tr_alloc_fmt_size(st->peak_allocated, s2, sizeof s2));
    put(t, "%s%-*s %*s %*s", indent, w, "reserved", w, tr_alloc_fmt_size(st->reserved, s1, sizeof s1), w,
        tr_alloc_fmt_size(st->peak_reserved, s2, sizeof s2));
}

/* ------------------------------------------------------------ the device's own figures */

int tr_alloc_device_memory(const tr_alloc *a, uint64_t *total, uint64_t *free_bytes, uint64_t *outside)
{
    *total = *free_bytes = *outside = 0;
    uint64_t t = 0, f = 0;
    if (!a->backend.mem_info || a->backend.mem_info(a->backend.user, &t, &f) != 0) return TR_EUSER;
    /* free and reserved are read at slightly different moments: clamp rather than wrap */
    uint64_t used = t > f ? t - f : 0, reserved = a->st.reserved;
    *total = t;
    *free_bytes = f;
    *outside = used > reserved ? used - reserved : 0;
    return TR_OK;
}

/* ------------------------------------------------------------ out of memory */

int tr_alloc_oom_message(const tr_alloc *a, tr_error *err, uint64_t size, uint64_t rounded,
                         uint64_t seg_size, int tag, uintptr_t stream, int hit_limit, int in_range)
{
    tr_alloc_stats st;
    tr_alloc_get_stats(a, &st);
    char s1[32], s2[32], s3[32], s4[32], s5[32];
    char msg[sizeof err->msg];
    text t = { msg, sizeof msg, 0 };
    put(&t, "out of memory on %s: could not allocate %s for %s (limit %s; %s allocated, %s reserved, "
            "largest free block %s).",
        a->device_label, tr_alloc_fmt_size(size, s1, sizeof s1), tr_tag_name(tag),
        st.limit ? tr_alloc_fmt_size(st.limit, s2, sizeof s2) : "none",
        tr_alloc_fmt_size(st.allocated, s3, sizeof s3), tr_alloc_fmt_size(st.reserved, s4, sizeof s4),
        tr_alloc_fmt_size(st.largest_free, s5, sizeof s5));
    if (!rounded)
        put(&t, " The request is larger than any device can hold.");
    else if (in_range)
        put(&t, " Growing the range that holds the large blocks by %s would pass the limit even after "
                "the cached memory was released; %s of headroom is left under it.",
            tr_alloc_fmt_size(seg_size, s1, sizeof s1),
            tr_alloc_fmt_size(st.limit > st.reserved ? st.limit - st.reserved : 0, s2, sizeof s2));
    else if (hit_limit)
        put(&t, " A new %s segment would pass the limit even after the cached segments were released; "
                "%s of headroom is left under it.",
            tr_alloc_fmt_size(seg_size, s1, sizeof s1),
            tr_alloc_fmt_size(st.limit > st.reserved ? st.limit - st.reserved : 0, s2, sizeof s2));
    else
        put(&t, " The device refused a new %s segment even after the cached segments were released.",
            tr_alloc_fmt_size(seg_size, s1, sizeof s1));
    if (stream) put(&t, " (Stream %#llx.)", (unsigned long long)stream);
    uint64_t dev_total, dev_free, dev_outside;
    if (tr_alloc_device_memory(a, &dev_total, &dev_free, &dev_outside) == TR_OK)
        put(&t, " The device has %s in all and %s free; %s of it is held outside this allocator (the CUDA "
                "context, libraries, other processes: compare nvidia-smi).",
            tr_alloc_fmt_size(dev_total, s1, sizeof s1), tr_alloc_fmt_size(dev_free, s2, sizeof s2),
            tr_alloc_fmt_size(dev_outside, s3, sizeof s3));
    put(&t, " Ledger:");
    for (int i = 0; i < TR_NTAGS; i++)
        put(&t, "%s %s %s (peak %s)", i ? "," : "", tr_tag_name(i),
            tr_alloc_fmt_size(st.tag_allocated[i], s1, sizeof s1), tr_alloc_fmt_size(st.tag_peak[i], s2, sizeof s2));
    put(&t, ". To shrink: activations -> precision = \"bf16\", checkpoint = { segments = N }, smaller "
            "batch.size with batch.accumulate; grads + optimizer -> lora = { r = 8, targets = { \"query\", "
            "\"value\" } }; weights -> precision = \"bf16\" (frozen weights in half); fragmentation "
            "(reserved well above allocated) -> memory.max_split_size; or raise memory.limit.\n");
    put_tag_table(&t, &st, "  ", 12);
    return tr_fail(err, TR_EOOM, "%s", msg);
}

/* ------------------------------------------------------------ report */

size_t tr_alloc_report(const tr_alloc *a, char *buf, size_t len)
{
    tr_alloc_stats st;
    tr_alloc_get_stats(a, &st);
    char s1[32], s2[32], s3[32], s4[32];
    static const char rule[] = "----------------------------------------------------------------------\n";
    static const char *const pools[2] = { "small", "large" };
    text t = { buf, len, 0 };
    if (len) buf[0] = '\0';
    put(&t, "memory on %s\n%s", a->device_label, rule);
    put_tag_table(&t, &st, "", 14);
    put(&t, "\n%s", rule);
    put(&t, "%-14s %14s %14s %14s %14s\n", "pool", "allocated", "peak alloc", "reserved", "peak reserved");
    for (int p = 0; p < 2; p++)
        put(&t, "%-14s %14s %14s %14s %14s\n", pools[p], tr_alloc_fmt_size(st.pool_allocated[p], s1, sizeof s1),
            tr_alloc_fmt_size(st.pool_peak_allocated[p], s2, sizeof s2),
            tr_alloc_fmt_size(st.pool_reserved[p], s3, sizeof s3),
            tr_alloc_fmt_size(st.pool_peak_reserved[p], s4, sizeof s4));
    put(&t, "%s", rule);
    put(&t, "%-22s %14s   %-22s %14s\n", "requested (live)", tr_alloc_fmt_size(st.requested, s1, sizeof s1),
        "largest free block", tr_alloc_fmt_size(st.largest_free, s2, sizeof s2));
    put(&t, "%-22s %14s   %-22s %14s\n", "inactive split", tr_alloc_fmt_size(st.inactive_split, s1, sizeof s1),
        "limit", st.limit ? tr_alloc_fmt_size(st.limit, s2, sizeof s2) : "none");
    put(&t, "%-22s %14s\n%s", "max_split_size",
        st.max_split_size != UINT64_MAX ? tr_alloc_fmt_size(st.max_split_size, s1, sizeof s1) : "none", rule);
    put(&t, "%-22s %14llu   %-22s %14llu\n", "allocs", (unsigned long long)st.n_alloc, "frees",
        (unsigned long long)st.n_free);
    put(&t, "%-22s %14llu   %-22s %14llu\n", "segments obtained", (unsigned long long)st.n_raw_alloc,
        "segments returned", (unsigned long long)st.n_raw_free);
    put(&t, "%-22s %14llu   %-22s %14llu\n", "segments now", (unsigned long long)st.n_segments,
        "live blocks", (unsigned long long)st.n_live_blocks);
    put(&t, "%-22s %14llu   %-22s %14llu\n", "retries", (unsigned long long)st.n_retries, "out of memory",
        (unsigned long long)st.n_ooms);
    uint64_t dev_total, dev_free, dev_outside;
    if (tr_alloc_device_memory(a, &dev_total, &dev_free, &dev_outside) == TR_OK) {
        put(&t, "%s%-22s %14s   %-22s %14s\n", rule, "device total", tr_alloc_fmt_size(dev_total, s1, sizeof s1),
            "device free", tr_alloc_fmt_size(dev_free, s2, sizeof s2));
        put(&t, "%-22s %14s   (CUDA context, libraries, other processes)\n", "outside this allocator",
            tr_alloc_fmt_size(dev_outside, s1, sizeof s1));
    }
    return t.need;
}

/* ------------------------------------------------------------ snapshot */

static int set_u64(json_t *o, const char *key, uint64_t v)
{
    return json_object_set_new(o, key, json_integer((json_int_t)v));
}

static json_t *stats_json(const tr_alloc_stats *st)
{
    static const char *const pools[2] = { "small", "large" };
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    const struct { const char *k; uint64_t v; } f[] = {
        { "allocated", st->allocated },     { "reserved", st->reserved },
        { "peak_allocated", st->peak_allocated }, { "peak_reserved", st->peak_reserved },
        { "requested", st->requested },     { "n_alloc", st->n_alloc },
        { "n_free", st->n_free },           { "n_raw_alloc", st->n_raw_alloc },
        { "n_raw_free", st->n_raw_free },   { "n_retries", st->n_retries },
        { "n_ooms", st->n_ooms },           { "n_segments", st->n_segments },
        { "n_live_blocks", st->n_live_blocks }, { "largest_free", st->largest_free },
        { "inactive_split", st->inactive_split }, { "limit", st->limit },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) bad |= set_u64(o, f[i].k, f[i].v);
    bad |= json_object_set_new(o, "max_split_size",
                               st->max_split_size == UINT64_MAX ? json_null() : json_integer((json_int_t)st->max_split_size));
    json_t *tags = json_object(), *peaks = json_object(), *pl = json_object();
    bad |= json_object_set_new(o, "by_tag", tags) | json_object_set_new(o, "peak_by_tag", peaks) |
           json_object_set_new(o, "pools", pl);
    for (int i = 0; i < TR_NTAGS && !bad; i++)
        bad |= set_u64(tags, tr_tag_name(i), st->tag_allocated[i]) | set_u64(peaks, tr_tag_name(i), st->tag_peak[i]);
    for (int p = 0; p < 2 && !bad; p++) {
        json_t *po = json_pack("{s:I,s:I,s:I,s:I}", "allocated", (json_int_t)st->pool_allocated[p], "reserved",
                               (json_int_t)st->pool_reserved[p], "peak_allocated",
                               (json_int_t)st->pool_peak_allocated[p], "peak_reserved",
                               (json_int_t)st->pool_peak_reserved[p]);
        bad |= json_object_set_new(pl, pools[p], po);
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int cmp_seg(const void *x, const void *y)
{
    uintptr_t a = (*(const tr_seg *const *)x)->base, b = (*(const tr_seg *const *)y)->base;
    return a < b ? -1 : a > b;
}

/* Segments by address, each with its blocks; NULL on host OOM. */
static json_t *segments_json(const tr_alloc *a)
{
    size_t n = 0;
    for (const tr_seg *s = a->segs; s; s = s->next) n++;
    const tr_seg **v = malloc((n ? n : 1) * sizeof *v);
    json_t *arr = json_array();
    if (!v || !arr) {
        free(v);
        json_decref(arr);
        return NULL;
    }
    n = 0;
    for (const tr_seg *s = a->segs; s; s = s->next) v[n++] = s;
    qsort(v, n, sizeof *v, cmp_seg);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        const tr_seg *s = v[i];
        json_t *blocks = json_array();
        for (const tr_blk *b = s->first; b && blocks && !bad; b = b->next) {
            json_t *bo = json_pack("{s:I,s:I,s:I,s:o,s:b}", "offset", (json_int_t)(b->addr - s->base), "size",
                                   (json_int_t)b->size, "requested", (json_int_t)b->requested, "tag",
                                   b->live ? json_string(tr_tag_name(b->tag)) : json_null(), "live", b->live);
            bad |= json_array_append_new(blocks, bo);
        }
        json_t *so = json_pack("{s:I,s:I,s:s,s:I,s:b,s:o}", "address", (json_int_t)s->base, "size",
                               (json_int_t)s->size, "pool", s->pool == TR_POOL_SMALL ? "small" : "large", "stream",
                               (json_int_t)s->stream, "growable", s->capacity > 0, "blocks", blocks);
        bad |= json_array_append_new(arr, so);
    }
    free(v);
    if (bad) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

/* The event ring, oldest first. */
static json_t *events_json(const tr_alloc *a)
{
    json_t *arr = json_array();
    uint64_t first = a->n_events > TR_ALLOC_RING ? a->n_events - TR_ALLOC_RING : 0;
    int bad = !arr;
    for (uint64_t i = first; i < a->n_events && !bad; i++) {
        const tr_alloc_event *e = &a->ring[i % TR_ALLOC_RING];
        json_t *eo = json_pack("{s:I,s:s,s:I,s:o,s:I,s:I}", "seq", (json_int_t)e->seq, "kind",
                               tr_alloc_event_name(e->kind), "size", (json_int_t)e->size, "tag",
                               e->tag >= 0 ? json_string(tr_tag_name(e->tag)) : json_null(), "address",
                               (json_int_t)e->addr, "stream", (json_int_t)e->stream);
        bad |= json_array_append_new(arr, eo);
    }
    if (bad) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

int tr_alloc_snapshot(const tr_alloc *a, const char *path, tr_error *err)
{
    tr_alloc_stats st;
    tr_alloc_get_stats(a, &st);
    json_t *root = json_pack("{s:s,s:o,s:o,s:o}", "device", a->device_name, "stats", stats_json(&st),
                             "segments", segments_json(a), "events", events_json(a));
    uint64_t dev_total, dev_free, dev_outside;
    if (root && tr_alloc_device_memory(a, &dev_total, &dev_free, &dev_outside) == TR_OK) {
        json_t *dm = json_pack("{s:I,s:I,s:I}", "total", (json_int_t)dev_total, "free", (json_int_t)dev_free,
                               "outside_allocator", (json_int_t)dev_outside);
        if (!dm || json_object_set_new(root, "device_memory", dm) != 0) {
            json_decref(root);
            root = NULL;
        }
    }
    if (!root)
        return tr_fail(err, TR_EINTERNAL, "memory snapshot for '%s': out of host memory while building the JSON",
                       path);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        json_decref(root);
        return tr_fail(err, TR_EINTERNAL, "memory snapshot for '%s': out of host memory", path);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    int rc = TR_OK;
    FILE *f = fopen(tmp, "w");
    if (!f) {
        rc = tr_fail(err, TR_EUSER,
                     "cannot write the memory snapshot '%s' (temporary file '%s': %s); give a path in an "
                     "existing, writable folder.",
                     path, tmp, strerror(errno));
        goto out;
    }
    int dumped = json_dumpf(root, f, JSON_INDENT(1));
    int flushed = fflush(f);
    int synced = flushed == 0 ? fsync(fileno(f)) : -1;
    int saved_errno = errno;
    int closed = fclose(f);
    if (dumped != 0 || flushed != 0 || synced != 0 || closed != 0) {
        rc = tr_fail(err, TR_EUSER, "cannot write the memory snapshot '%s' (writing '%s' failed: %s); check the "
                     "disk has room and the folder is writable.",
                     path, tmp, strerror(saved_errno ? saved_errno : EIO));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        rc = tr_fail(err, TR_EUSER, "cannot write the memory snapshot '%s' (renaming '%s' to it: %s); give a "
                     "path that is not a folder, in a writable folder.",
                     path, tmp, strerror(errno));
        unlink(tmp);
    }
out:
    free(tmp);
    json_decref(root);
    return rc;
}
