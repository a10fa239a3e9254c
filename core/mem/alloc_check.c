/* alloc_check.c — tr_alloc_check: walks every segment, block, the free-block treaps and
 * the live-block map of a caching allocator and compares them with each other and with
 * its stats (the invariants listed in alloc_internal.h). For tests; O(blocks). */
#include "alloc_internal.h"

#include <stdlib.h>

enum { MIN_BLOCK = 512 }; /* every block size is a multiple of alloc.c's rounding unit */

/* Walks a treap: order, sub_max, membership; counts its nodes into *n. */
static int check_treap(const tr_blk *t, int pool, const tr_blk *lo, const tr_blk *hi, uint64_t *n,
                       tr_error *err)
{
    if (!t) return TR_OK;
    (*n)++;
    if (t->live || t->pool != pool)
        return tr_fail(err, TR_EINTERNAL, "alloc check: block %#lx in pool %d's free tree is %s",
                       (unsigned long)t->addr, pool, t->live ? "live" : "of another pool");
    if ((lo && tr_alloc_key_cmp(t, lo->stream, lo->size, lo->addr) <= 0) ||
        (hi && tr_alloc_key_cmp(t, hi->stream, hi->size, hi->addr) >= 0))
        return tr_fail(err, TR_EINTERNAL, "alloc check: free tree out of order at block %#lx",
                       (unsigned long)t->addr);
    if ((t->left && t->left->prio > t->prio) || (t->right && t->right->prio > t->prio))
        return tr_fail(err, TR_EINTERNAL, "alloc check: free tree heap order broken at %#lx",
                       (unsigned long)t->addr);
    uint64_t m = t->size;
    if (t->left && t->left->sub_max > m) m = t->left->sub_max;
    if (t->right && t->right->sub_max > m) m = t->right->sub_max;
    if (m != t->sub_max)
        return tr_fail(err, TR_EINTERNAL, "alloc check: free tree largest-size cache wrong at %#lx",
                       (unsigned long)t->addr);
    int rc = check_treap(t->left, pool, lo, t, n, err);
    return rc ? rc : check_treap(t->right, pool, t, hi, n, err);
}

static int cmp_seg_base(const void *x, const void *y)
{
    uintptr_t a = (*(tr_seg *const *)x)->base, b = (*(tr_seg *const *)y)->base;
    return a < b ? -1 : a > b;
}

#define CHECK_EQ(what, got, want)                                                                 \
    do {                                                                                          \
        if ((uint64_t)(got) != (uint64_t)(want)) {                                                \
            rc = tr_fail(err, TR_EINTERNAL, "alloc check: %s is %llu but should be %llu", what,   \
                         (unsigned long long)(got), (unsigned long long)(want));                  \
            goto done;                                                                            \
        }                                                                                         \
    } while (0)

int tr_alloc_check(const tr_alloc *a, tr_error *err)
{
    int rc = TR_OK;
    uint64_t reserved = 0, allocated = 0, requested = 0, inactive = 0, n_free = 0, n_live = 0;
    uint64_t n_segs = 0, tag[TR_NTAGS] = { 0 }, pool_alloc[2] = { 0 }, pool_res[2] = { 0 };
    uint64_t largest = 0;
    for (const tr_seg *s = a->segs; s; s = s->next) n_segs++;
    tr_seg **sorted = n_segs ? malloc(n_segs * sizeof *sorted) : NULL;
    if (n_segs && !sorted) return tr_fail(err, TR_EINTERNAL, "alloc check: out of host memory");
    size_t i = 0;
    for (tr_seg *s = a->segs; s; s = s->next) {
        sorted[i++] = s;
        if ((s->prev ? s->prev->next : a->segs) != s) {
            rc = tr_fail(err, TR_EINTERNAL, "alloc check: segment list links broken at %#lx",
                         (unsigned long)s->base);
            goto done;
        }
        reserved += s->size;
        pool_res[s->pool] += s->size;
        uintptr_t at = s->base;
        uint64_t seg_live = 0, seg_n_live = 0;
        const tr_blk *prev = NULL;
        for (const tr_blk *b = s->first; b; prev = b, b = b->next) {
            if (b->addr != at || b->prev != prev || b->seg != s || b->stream != s->stream ||
                b->pool != s->pool || b->size == 0 || b->size % MIN_BLOCK != 0 ||
                b->size > s->base + s->size - b->addr) {
                rc = tr_fail(err, TR_EINTERNAL,
                             "alloc check: block %#lx does not tile segment %#lx (expected at %#lx)",
                             (unsigned long)b->addr, (unsigned long)s->base, (unsigned long)at);
                goto done;
            }
            if (!b->live && prev && !prev->live) {
                rc = tr_fail(err, TR_EINTERNAL, "alloc check: adjacent free blocks %#lx and %#lx",
                             (unsigned long)prev->addr, (unsigned long)b->addr);
                goto done;
            }
            if (b->live) {
                if (b->tag < 0 || b->tag >= TR_NTAGS || tr_alloc_find_live(a, b->addr) != b) {
                    rc = tr_fail(err, TR_EINTERNAL, "alloc check: live block %#lx has tag %d or "
                                 "is missing from the address map", (unsigned long)b->addr, b->tag);
                    goto done;
                }
                n_live++;
                seg_n_live++;
                seg_live += b->size;
                allocated += b->size;
                requested += b->requested;
                tag[b->tag] += b->size;
                pool_alloc[b->pool] += b->size;
            } else {
                n_free++;
                if (b->size > largest) largest = b->size;
            }
            at += b->size;
        }
        if (prev != s->last) {
            rc = tr_fail(err, TR_EINTERNAL, "alloc check: segment %#lx's last block is not the one that ends it",
                         (unsigned long)s->base);
            goto done;
        }
        if (at != s->base + s->size) {
            rc = tr_fail(err, TR_EINTERNAL, "alloc check: blocks of segment %#lx end at %#lx, not its end",
                         (unsigned long)s->base, (unsigned long)at);
            goto done;
        }
        CHECK_EQ("a segment's live block count", s->n_live, seg_n_live);
        CHECK_EQ("a segment's live bytes", s->live_bytes, seg_live);
        if (seg_n_live) inactive += s->size - seg_live;
    }
    if (n_segs > 1) qsort(sorted, n_segs, sizeof *sorted, cmp_seg_base);   /* sorted is NULL for none */
    for (i = 1; i < n_segs; i++) {
        if (sorted[i - 1]->base + sorted[i - 1]->size > sorted[i]->base) {
            rc = tr_fail(err, TR_EINTERNAL, "alloc check: segments %#lx and %#lx overlap",
                         (unsigned long)sorted[i - 1]->base, (unsigned long)sorted[i]->base);
            goto done;
        }
    }
    uint64_t in_trees = 0;
    for (int p = 0; p < 2; p++)
        if ((rc = check_treap(a->free_tree[p], p, NULL, NULL, &in_trees, err))) goto done;
    CHECK_EQ("the number of free blocks in the trees", in_trees, n_free);
    uint64_t in_map = 0;
    for (size_t h = 0; h < a->n_buckets; h++)
        for (const tr_blk *b = a->buckets[h]; b; b = b->hnext) in_map++;
    CHECK_EQ("the number of blocks in the address map", in_map, n_live);

    const tr_alloc_stats *st = &a->st;
    CHECK_EQ("reserved", st->reserved, reserved);
    CHECK_EQ("allocated", st->allocated, allocated);
    CHECK_EQ("requested", st->requested, requested);
    CHECK_EQ("n_segments", st->n_segments, n_segs);
    CHECK_EQ("n_live_blocks", st->n_live_blocks, n_live);
    CHECK_EQ("inactive_split", st->inactive_split, inactive);
    CHECK_EQ("largest_free", tr_alloc_largest_free(a), largest);
    for (int t = 0; t < TR_NTAGS; t++) {
        CHECK_EQ(tr_tag_name(t), st->tag_allocated[t], tag[t]);
        if (st->tag_peak[t] < st->tag_allocated[t]) CHECK_EQ("a tag's peak", st->tag_peak[t], tag[t]);
    }
    for (int p = 0; p < 2; p++) {
        CHECK_EQ(p ? "large pool allocated" : "small pool allocated", st->pool_allocated[p], pool_alloc[p]);
        CHECK_EQ(p ? "large pool reserved" : "small pool reserved", st->pool_reserved[p], pool_res[p]);
        if (st->pool_peak_allocated[p] < pool_alloc[p])
            CHECK_EQ("a pool's peak allocated", st->pool_peak_allocated[p], pool_alloc[p]);
        if (st->pool_peak_reserved[p] < pool_res[p])
            CHECK_EQ("a pool's peak reserved", st->pool_peak_reserved[p], pool_res[p]);
    }
    if (st->peak_allocated < allocated) CHECK_EQ("peak_allocated", st->peak_allocated, allocated);
    if (st->peak_reserved < reserved) CHECK_EQ("peak_reserved", st->peak_reserved, reserved);
    if (allocated > reserved) CHECK_EQ("allocated (above reserved)", allocated, reserved);
done:
    free(sorted);
    return rc;
}

