/* alloc.c — the caching allocator: size rounding, pools, best fit, splitting,
 * coalescing, the growable range, the limit, release-and-retry, stats and the event ring.
 * The CPU raw backend lives in alloc_cpu.c; the report, the snapshot and the out-of-memory
 * message in alloc_report.c, the invariant check in alloc_check.c; the data structures and
 * their invariants in alloc_internal.h.
 *
 * Policy (PyTorch's CUDACachingAllocator, see alloc.h):
 *   - sizes round up to 512 B; rounded <= 1 MiB is the small pool (2 MiB segments),
 *     larger is the large pool (20 MiB segments below 10 MiB, else the size rounded up
 *     to 2 MiB);
 *   - best fit: the free block with the smallest (size, address) >= the request on the
 *     same pool and stream, found in O(log n) in a treap keyed by (stream, size, address);
 *   - max_split_size: a cached block >= max_split_size serves only requests >=
 *     max_split_size, and then only when it is less than the request + 20 MiB; a block is
 *     split only when the request is below max_split_size, so a cached oversize block is
 *     never split (a fresh segment for a smaller request still is, or a 2 MiB request
 *     would hold a whole 20 MiB segment);
 *   - split when the remainder is >= 512 B (small pool, the range) or > 1 MiB (a large
 *     pool segment);
 *   - a block is reused only on the stream of the segment it came from;
 *   - a new segment that the backend refuses, or that would pass the limit, makes the
 *     allocator release every cached segment with no live block and try once more;
 *   - the growable range (a backend with range_reserve: the CPU's): the large pool of the
 *     first stream that asks is one range. Best fit among its free blocks but its free end;
 *     when none fits, the free end serves, grown by what it lacks, in 2 MiB steps (PyTorch's
 *     expandable segments). With segments of their own, a block that a smaller tensor with
 *     a longer life split (a kept [N, C] in a freed [N, 4C] temporary) strands the rest
 *     until that tensor dies, and the next [N, 4C] takes a whole new segment; in one range
 *     it takes only what the free end lacks. Replaying the allocations of the benchmark's
 *     full fine-tunes at BERT-base's shape (32 x 128), segments reserved 320 MB (ModernBERT)
 *     and 270 MB (BERT) over the peak allocation, the range 12 and 27 MB. Emptying the
 *     cache returns the free end.
 * With caching off (TRAINER_NO_MEMORY_CACHING=1, as PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING)
 * every request is a segment of its own, asked of the backend at its exact size and returned
 * at its free, so a memory checker behind the backend (ASan, compute-sanitizer) sees every
 * overrun and every use after free; the ledger still counts the rounded sizes.
 * Not thread-safe: one allocator per device, used from one thread. */
#include "alloc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)

enum {
    MIN_BLOCK = 512,            /* rounding unit and smallest split remainder */
    SMALL_SIZE = 1048576,       /* largest small-pool request: 1 MiB */
    SMALL_BUFFER = 2097152,     /* small-pool segment: 2 MiB */
    LARGE_BUFFER = 20971520,    /* segment for 1-10 MiB requests: 20 MiB */
    MIN_LARGE_ALLOC = 10485760, /* from here segments are the size rounded to 2 MiB */
    ROUND_LARGE = 2097152
};

/* ------------------------------------------------------------ sizes */

static uint64_t round_up(uint64_t n, uint64_t unit) { return (n + unit - 1) / unit * unit; }

/* The request rounded up to 512 B; 0 becomes 512. 0 when it would overflow. */
static uint64_t round_size(size_t size)
{
    if (size < MIN_BLOCK) return MIN_BLOCK;
    if (size > UINT64_MAX / 4) return 0;
    return round_up(size, MIN_BLOCK);
}

static int pool_of(uint64_t rounded) { return rounded <= SMALL_SIZE ? TR_POOL_SMALL : TR_POOL_LARGE; }

static uint64_t segment_size(uint64_t rounded)
{
    if (rounded <= SMALL_SIZE) return SMALL_BUFFER;
    if (rounded < MIN_LARGE_ALLOC) return LARGE_BUFFER;
    return round_up(rounded, ROUND_LARGE);
}

/* A segment's large block keeps a rest of up to 1 MiB (no sliver a later request could not
 * use); in the range a rest is split off whatever its size, since it joins the free end or
 * its free neighbours, and a block then counts the bytes it was asked for. */
static int should_split(const tr_alloc *a, const tr_blk *b, uint64_t rounded)
{
    uint64_t rest = b->size - rounded;
    if (b->pool == TR_POOL_SMALL || b->seg->capacity) return rest >= MIN_BLOCK;
    return rounded < a->max_split_size && rest > SMALL_SIZE;
}

/* ------------------------------------------------------------ block records */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A zeroed block record (recycled when possible); NULL when the host is out of memory. */
static tr_blk *blk_new(tr_alloc *a)
{
    tr_blk *b = a->spare;
    if (b) a->spare = b->hnext;
    else if (!(b = malloc(sizeof *b))) return NULL;
    memset(b, 0, sizeof *b);
    b->prio = splitmix64(&a->rng);
    b->tag = -1;
    return b;
}

static void blk_recycle(tr_alloc *a, tr_blk *b)
{
    b->hnext = a->spare;
    a->spare = b;
}

/* ------------------------------------------------------------ free-block treap */

/* Order of free blocks in a pool: (stream, size, address). */
int tr_alloc_key_cmp(const tr_blk *b, uintptr_t stream, uint64_t size, uintptr_t addr)
{
    if (b->stream != stream) return b->stream < stream ? -1 : 1;
    if (b->size != size) return b->size < size ? -1 : 1;
    if (b->addr != addr) return b->addr < addr ? -1 : 1;
    return 0;
}

static void treap_update(tr_blk *t)
{
    uint64_t m = t->size;
    if (t->left && t->left->sub_max > m) m = t->left->sub_max;
    if (t->right && t->right->sub_max > m) m = t->right->sub_max;
    t->sub_max = m;
}

/* Splits t into the nodes ordered before n (*l) and the rest (*r). */
static void treap_split(tr_blk *t, const tr_blk *n, tr_blk **l, tr_blk **r)
{
    if (!t) {
        *l = *r = NULL;
    } else if (tr_alloc_key_cmp(t, n->stream, n->size, n->addr) < 0) {
        treap_split(t->right, n, &t->right, r);
        treap_update(t);
        *l = t;
    } else {
        treap_split(t->left, n, l, &t->left);
        treap_update(t);
        *r = t;
    }
}

static tr_blk *treap_merge(tr_blk *l, tr_blk *r)
{
    if (!l) return r;
    if (!r) return l;
    if (l->prio > r->prio) {
        l->right = treap_merge(l->right, r);
        treap_update(l);
        return l;
    }
    r->left = treap_merge(l, r->left);
    treap_update(r);
    return r;
}

static tr_blk *treap_insert(tr_blk *t, tr_blk *n)
{
    if (!t || n->prio > t->prio) {
        treap_split(t, n, &n->left, &n->right);
        treap_update(n);
        return n;
    }
    if (tr_alloc_key_cmp(n, t->stream, t->size, t->addr) < 0) t->left = treap_insert(t->left, n);
    else t->right = treap_insert(t->right, n);
    treap_update(t);
    return t;
}

/* n should be in t; when it is not, t is unchanged. */
static tr_blk *treap_erase(tr_blk *t, tr_blk *n)
{
    if (!t) return NULL;
    if (t == n) {
        tr_blk *m = treap_merge(n->left, n->right);
        n->left = n->right = NULL;
        return m;
    }
    if (tr_alloc_key_cmp(n, t->stream, t->size, t->addr) < 0) t->left = treap_erase(t->left, n);
    else t->right = treap_erase(t->right, n);
    treap_update(t);
    return t;
}

/* The smallest free block on `stream` with size >= `size`, or NULL. */
static tr_blk *treap_lower_bound(tr_blk *t, uintptr_t stream, uint64_t size)
{
    tr_blk *best = NULL;
    while (t) {
        if (tr_alloc_key_cmp(t, stream, size, 0) >= 0) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best && best->stream == stream ? best : NULL;
}

static void free_insert(tr_alloc *a, tr_blk *b) { a->free_tree[b->pool] = treap_insert(a->free_tree[b->pool], b); }
static void free_erase(tr_alloc *a, tr_blk *b) { a->free_tree[b->pool] = treap_erase(a->free_tree[b->pool], b); }

/* ------------------------------------------------------------ live-block hash map */

static size_t hash_addr(uintptr_t addr, size_t n_buckets)
{
    uint64_t h = (uint64_t)(addr >> 8) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (n_buckets - 1);
}

/* Doubles the table when it is full; on host OOM keeps the old one (longer chains). */
static void hash_grow(tr_alloc *a)
{
    size_t n = a->n_buckets * 2;
    tr_blk **nb = calloc(n, sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < a->n_buckets; i++) {
        tr_blk *b = a->buckets[i];
        while (b) {
            tr_blk *next = b->hnext;
            size_t h = hash_addr(b->addr, n);
            b->hnext = nb[h];
            nb[h] = b;
            b = next;
        }
    }
    free(a->buckets);
    a->buckets = nb;
    a->n_buckets = n;
}

static void hash_insert(tr_alloc *a, tr_blk *b)
{
    if (a->st.n_live_blocks >= a->n_buckets) hash_grow(a);
    size_t h = hash_addr(b->addr, a->n_buckets);
    b->hnext = a->buckets[h];
    a->buckets[h] = b;
}

tr_blk *tr_alloc_find_live(const tr_alloc *a, uintptr_t addr)
{
    for (tr_blk *b = a->buckets[hash_addr(addr, a->n_buckets)]; b; b = b->hnext)
        if (b->addr == addr) return b;
    return NULL;
}

static tr_blk *hash_remove(tr_alloc *a, uintptr_t addr)
{
    tr_blk **p = &a->buckets[hash_addr(addr, a->n_buckets)];
    for (; *p; p = &(*p)->hnext) {
        if ((*p)->addr == addr) {
            tr_blk *b = *p;
            *p = b->hnext;
            b->hnext = NULL;
            return b;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ events and stats */

static void record(tr_alloc *a, int kind, uint64_t size, uintptr_t addr, uintptr_t stream, int tag)
{
    tr_alloc_event *e = &a->ring[a->n_events % TR_ALLOC_RING];
    e->seq = a->n_events++;
    e->kind = kind;
    e->size = size;
    e->addr = addr;
    e->stream = stream;
    e->tag = tag;
}

static void raise_peak(uint64_t *peak, uint64_t now)
{
    if (now > *peak) *peak = now;
}

/* A segment's share of inactive_split: its free bytes while it holds a live block. */
static uint64_t seg_inactive(const tr_seg *s) { return s->n_live ? s->size - s->live_bytes : 0; }

static void mark_live(tr_alloc *a, tr_blk *b, uint64_t requested, int tag)
{
    tr_alloc_stats *st = &a->st;
    tr_seg *s = b->seg;
    st->inactive_split -= seg_inactive(s);
    s->n_live++;
    s->live_bytes += b->size;
    st->inactive_split += seg_inactive(s);
    b->live = 1;
    b->tag = tag;
    b->requested = requested;
    hash_insert(a, b);
    st->n_live_blocks++;
    st->n_alloc++;
    st->allocated += b->size;
    st->requested += requested;
    st->tag_allocated[tag] += b->size;
    st->pool_allocated[b->pool] += b->size;
    raise_peak(&st->peak_allocated, st->allocated);
    raise_peak(&st->tag_peak[tag], st->tag_allocated[tag]);
    raise_peak(&st->pool_peak_allocated[b->pool], st->pool_allocated[b->pool]);
}

static void mark_free(tr_alloc *a, tr_blk *b)
{
    tr_alloc_stats *st = &a->st;
    tr_seg *s = b->seg;
    st->inactive_split -= seg_inactive(s);
    s->n_live--;
    s->live_bytes -= b->size;
    st->inactive_split += seg_inactive(s);
    st->n_live_blocks--;
    st->n_free++;
    st->allocated -= b->size;
    st->requested -= b->requested;
    st->tag_allocated[b->tag] -= b->size;
    st->pool_allocated[b->pool] -= b->size;
    b->live = 0;
    b->tag = -1;
    b->requested = 0;
}

/* ------------------------------------------------------------ segments */

/* Puts s at the head of the segment list. */
static void segment_link(tr_alloc *a, tr_seg *s)
{
    s->next = a->segs;
    if (a->segs) a->segs->prev = s;
    a->segs = s;
}

/* A new segment from the backend, as one free block that is not yet in the treap.
 * NULL when it would pass the limit (*hit_limit = 1) or the backend (or the host, for
 * the records) refuses. */
static tr_blk *segment_new(tr_alloc *a, int pool, uintptr_t stream, uint64_t size, uint64_t raw_size,
                           int *hit_limit)
{
    if (a->limit && (a->st.reserved > a->limit || size > a->limit - a->st.reserved)) {
        *hit_limit = 1;
        return NULL;
    }
    tr_seg *s = calloc(1, sizeof *s);
    tr_blk *b = blk_new(a);
    void *p = s && b ? a->backend.raw_alloc(a->backend.user, (size_t)raw_size) : NULL;
    if (!p) {
        free(s);
        if (b) blk_recycle(a, b);
        return NULL;
    }
    s->base = (uintptr_t)p;
    s->size = size;
    s->raw_size = raw_size;
    s->stream = stream;
    s->pool = pool;
    s->first = s->last = b;
    segment_link(a, s);
    b->addr = s->base;
    b->size = size;
    b->stream = stream;
    b->pool = pool;
    b->seg = s;
    tr_alloc_stats *st = &a->st;
    st->reserved += size;
    st->pool_reserved[pool] += size;
    st->n_segments++;
    st->n_raw_alloc++;
    raise_peak(&st->peak_reserved, st->reserved);
    raise_peak(&st->pool_peak_reserved[pool], st->pool_reserved[pool]);
    record(a, TR_EV_RAW_ALLOC, size, s->base, stream, -1);
    return b;
}

/* Returns a segment that holds no live block to the backend. Coalescing leaves it one
 * free block; walking them all keeps a coalescing bug a check failure, not a crash. */
static void segment_release(tr_alloc *a, tr_seg *s)
{
    for (tr_blk *b = s->first; b;) {
        tr_blk *next = b->next;
        free_erase(a, b);
        blk_recycle(a, b);
        b = next;
    }
    if (s->prev) s->prev->next = s->next;
    else a->segs = s->next;
    if (s->next) s->next->prev = s->prev;
    a->backend.raw_free(a->backend.user, (void *)s->base, (size_t)s->raw_size);
    tr_alloc_stats *st = &a->st;
    st->reserved -= s->size;
    st->pool_reserved[s->pool] -= s->size;
    st->n_segments--;
    st->n_raw_free++;
    record(a, TR_EV_RAW_FREE, s->size, s->base, s->stream, -1);
    free(s);
}

/* ------------------------------------------------------------ the growable range */

enum { RANGE_STEP = 2097152 };                        /* grows and shrinks in 2 MiB steps */
#define RANGE_WANT ((uint64_t)1 << 40)               /* address space asked for: 1 TiB */

/* The range that serves the large pool of `stream`: made at the first call (empty), NULL
 * when the backend has none or refuses one, or another stream has it. */
static tr_seg *range_of(tr_alloc *a, uintptr_t stream)
{
    if (a->range) return a->range->stream == stream ? a->range : NULL;
    if (a->range_refused || !a->backend.range_reserve) return NULL;
    uint64_t cap = RANGE_WANT;
    tr_seg *s = calloc(1, sizeof *s);
    void *p = s ? a->backend.range_reserve(a->backend.user, &cap) : NULL;
    if (!p || cap < RANGE_STEP) {
        if (p) a->backend.range_release(a->backend.user, p, cap);
        free(s);
        a->range_refused = 1;
        return NULL;
    }
    s->base = (uintptr_t)p;
    s->capacity = cap;
    s->stream = stream;
    s->pool = TR_POOL_LARGE;
    segment_link(a, s);
    a->st.n_segments++;
    a->range = s;
    return s;
}

/* Grows the range s by `grow` bytes (a multiple of RANGE_STEP) at its end and returns the
 * free block that ends there (the last one, extended, or a new one), out of the treap.
 * NULL when it would pass the limit (*hit_limit = 1) or the backend refuses. */
static tr_blk *range_grow(tr_alloc *a, tr_seg *s, uint64_t grow, int *hit_limit)
{
    tr_alloc_stats *st = &a->st;
    if (a->limit && (st->reserved > a->limit || grow > a->limit - st->reserved)) {
        *hit_limit = 1;
        return NULL;
    }
    tr_blk *b = s->last && !s->last->live ? s->last : NULL;
    tr_blk *fresh = b ? NULL : blk_new(a);
    if (!b && !fresh) return NULL;
    if (a->backend.range_grow(a->backend.user, (void *)s->base, s->size, s->size + grow) != 0) {
        if (fresh) blk_recycle(a, fresh);
        return NULL;
    }
    if (b) {
        free_erase(a, b);
    } else {
        b = fresh;
        b->addr = s->base + s->size;
        b->size = 0;
        b->stream = s->stream;
        b->pool = s->pool;
        b->seg = s;
        b->prev = s->last;
        b->next = NULL;
        if (s->last) s->last->next = b;
        else s->first = b;
        s->last = b;
    }
    record(a, TR_EV_RAW_ALLOC, grow, s->base + s->size, s->stream, -1);
    st->inactive_split -= seg_inactive(s);
    s->size += grow;
    b->size += grow;
    st->inactive_split += seg_inactive(s);
    st->reserved += grow;
    st->pool_reserved[s->pool] += grow;
    st->n_raw_alloc++;
    raise_peak(&st->peak_reserved, st->reserved);
    raise_peak(&st->pool_peak_reserved[s->pool], st->pool_reserved[s->pool]);
    return b;
}

/* A block of at least `rounded` bytes from the range's end: its free last block, grown by
 * what it lacks; NULL when there is no range for the stream, it is full, or it cannot grow
 * (*grow: the bytes it would have grown by, for the out-of-memory message). */
static tr_blk *range_take(tr_alloc *a, uintptr_t stream, uint64_t rounded, int *hit_limit, uint64_t *grow_out)
{
    tr_seg *s = range_of(a, stream);
    if (!s) return NULL;
    uint64_t have = s->last && !s->last->live ? s->last->size : 0;
    if (have >= rounded) {   /* the free end fits as it is */
        free_erase(a, s->last);
        return s->last;
    }
    uint64_t grow = round_up(rounded - have, RANGE_STEP);
    if (grow > s->capacity - s->size) return NULL;
    *grow_out = grow;
    return range_grow(a, s, grow, hit_limit);
}

/* Returns the range's free end to the backend, from the first 2 MiB step boundary in its
 * last block on (a failed shrink keeps it). */
static void range_trim(tr_alloc *a, tr_seg *s)
{
    tr_blk *last = s->last;
    if (!last || last->live) return;
    uint64_t from = round_up(last->addr - s->base, RANGE_STEP);
    if (from >= s->size) return;
    if (a->backend.range_shrink(a->backend.user, (void *)s->base, from, s->size) != 0) return;
    uint64_t cut = s->size - from;
    tr_alloc_stats *st = &a->st;
    record(a, TR_EV_RAW_FREE, cut, s->base + from, s->stream, -1);
    free_erase(a, last);
    if (last->size == cut) {
        s->last = last->prev;
        if (last->prev) last->prev->next = NULL;
        else s->first = NULL;
        blk_recycle(a, last);
    } else {
        last->size -= cut;
        free_insert(a, last);
    }
    st->inactive_split -= seg_inactive(s);
    s->size = from;
    st->inactive_split += seg_inactive(s);
    st->reserved -= cut;
    st->pool_reserved[s->pool] -= cut;
    st->n_raw_free++;
}

void tr_alloc_empty_cache(tr_alloc *a)
{
    tr_seg *s = a->segs;
    while (s) {
        tr_seg *next = s->next;
        if (s->capacity) range_trim(a, s);
        else if (s->n_live == 0) segment_release(a, s);
        s = next;
    }
}

/* ------------------------------------------------------------ create, destroy */

tr_alloc *tr_alloc_new(const tr_raw_backend *backend)
{
    tr_alloc *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->n_buckets = 1024;
    a->buckets = calloc(a->n_buckets, sizeof *a->buckets);
    if (!a->buckets) {
        free(a);
        return NULL;
    }
    a->backend = *backend;
    snprintf(a->device_name, sizeof a->device_name, "%s",
             backend->device_name ? backend->device_name : "device");
    a->backend.device_name = a->device_name;
    if (backend->device_card && backend->device_card[0])
        snprintf(a->device_label, sizeof a->device_label, "%s (%s)", a->device_name, backend->device_card);
    else
        snprintf(a->device_label, sizeof a->device_label, "%s", a->device_name);
    a->backend.device_card = NULL; /* the caller's string need not outlive this call */
    a->rng = 0x5EED;
    a->max_split_size = UINT64_MAX;
    const char *nc = getenv("TRAINER_NO_MEMORY_CACHING");
    a->no_caching = nc && strcmp(nc, "1") == 0;
    return a;
}

void tr_alloc_destroy(tr_alloc *a)
{
    if (!a) return;
    while (a->segs) {
        tr_seg *s = a->segs;
        a->segs = s->next;
        for (tr_blk *b = s->first; b;) {
            tr_blk *next = b->next;
            free(b);
            b = next;
        }
        if (s->capacity) a->backend.range_release(a->backend.user, (void *)s->base, s->capacity);
        else a->backend.raw_free(a->backend.user, (void *)s->base, (size_t)s->raw_size);
        free(s);
    }
    while (a->spare) {
        tr_blk *b = a->spare;
        a->spare = b->hnext;
        free(b);
    }
    free(a->buckets);
    free(a);
}

/* ------------------------------------------------------------ malloc, free */

/* The cached block that best fits, already out of the treap; NULL when none may serve. */
static tr_blk *take_cached(tr_alloc *a, int pool, uintptr_t stream, uint64_t rounded)
{
    /* The growable range's free end is left out: it is the one block that can grow, so a hole
     * inside the range that fits serves first, and the end serves (range_take) when none does
     * (docs/BENCHMARKS.md: less held than plain best fit over the benchmark's steps). */
    tr_seg *r = a->range;
    tr_blk *end = pool == TR_POOL_LARGE && r && r->stream == stream && r->last && !r->last->live ? r->last : NULL;
    if (end) free_erase(a, end);
    tr_blk *b = treap_lower_bound(a->free_tree[pool], stream, rounded);
    if (end) free_insert(a, end);
    if (!b) return NULL;
    uint64_t msz = a->max_split_size;
    /* An oversize block serves only oversize requests, and not far bigger ones: a large
     * cached block is not eaten by a small request it could not be split for. */
    if (rounded < msz && b->size >= msz) return NULL;
    if (rounded >= msz && b->size - rounded >= LARGE_BUFFER) return NULL;
    free_erase(a, b);
    return b;
}

/* Cuts b down to `rounded` bytes; the rest becomes a free block in the treap. When the
 * host cannot give a record, b is served whole (still correct, only less frugal). */
static void split_block(tr_alloc *a, tr_blk *b, uint64_t rounded)
{
    tr_blk *r = blk_new(a);
    if (!r) return;
    r->addr = b->addr + rounded;
    r->size = b->size - rounded;
    r->stream = b->stream;
    r->pool = b->pool;
    r->seg = b->seg;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    else b->seg->last = r;
    b->next = r;
    b->size = rounded;
    free_insert(a, r);
}

/* Joins b->next, its neighbour in the segment, into b (the undoing of split_block); neither is
 * in the treap. */
static void merge_next(tr_alloc *a, tr_blk *b)
{
    tr_blk *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    else b->seg->last = b;
    blk_recycle(a, n);
}

int tr_alloc_malloc(tr_alloc *a, size_t size, int tag, uintptr_t stream, void **out, tr_error *err)
{
    *out = NULL;
    if (tag < 0 || tag >= TR_NTAGS)
        return tr_fail(err, TR_EUSER,
                       "tr_alloc_malloc: tag %d is not a memory tag; use one of TR_TAG_WEIGHTS, "
                       "TR_TAG_GRADS, TR_TAG_OPTIMIZER, TR_TAG_ACTIVATIONS, TR_TAG_WORKSPACE (0-4).",
                       tag);
    uint64_t rounded = round_size(size);
    int pool = pool_of(rounded);
    uint64_t seg_size = !rounded ? 0 : a->no_caching ? rounded : segment_size(rounded);
    uint64_t raw_size = a->no_caching ? (size ? size : 1) : seg_size;
    int hit_limit = 0;
    int ranged = pool == TR_POOL_LARGE && !a->no_caching;   /* the growable range may serve */
    uint64_t grow = 0;   /* what the range last lacked, when it passed the limit */
    tr_blk *b = rounded && !a->no_caching ? take_cached(a, pool, stream, rounded) : NULL;
    if (!b && rounded && ranged) b = range_take(a, stream, rounded, &hit_limit, &grow);
    if (!b && rounded && !hit_limit) b = segment_new(a, pool, stream, seg_size, raw_size, &hit_limit);
    if (!b && rounded) {
        a->st.n_retries++;
        tr_alloc_empty_cache(a);
        hit_limit = 0;
        grow = 0;
        if (ranged) b = range_take(a, stream, rounded, &hit_limit, &grow);
        if (!b && !hit_limit) b = segment_new(a, pool, stream, seg_size, raw_size, &hit_limit);
    }
    if (!b) {
        a->st.n_ooms++;
        record(a, TR_EV_OOM, size, 0, stream, tag);
        return tr_alloc_oom_message(a, err, size, rounded, hit_limit && grow ? grow : seg_size, tag, stream,
                                    hit_limit, hit_limit && grow);
    }
    if (should_split(a, b, rounded)) split_block(a, b, rounded);
    mark_live(a, b, size, tag);
    record(a, TR_EV_ALLOC, b->size, b->addr, stream, tag);
    *out = (void *)b->addr;
    return TR_OK;
}

void tr_alloc_free(tr_alloc *a, void *ptr)
{
    if (!ptr) return;
    tr_blk *b = hash_remove(a, (uintptr_t)ptr);
    if (!b) return; /* not ours, or already freed: nothing safe to do but ignore it */
    record(a, TR_EV_FREE, b->size, b->addr, b->stream, b->tag);
    mark_free(a, b);
    tr_blk *p = b->prev;
    if (p && !p->live) {
        free_erase(a, p);
        merge_next(a, p);
        b = p;
    }
    tr_blk *n = b->next;
    if (n && !n->live) {
        free_erase(a, n);
        merge_next(a, b);
    }
    free_insert(a, b);
    if (a->no_caching && b->seg->n_live == 0 && !b->seg->capacity) segment_release(a, b->seg);
}

size_t tr_alloc_block_size(const tr_alloc *a, const void *ptr)
{
    const tr_blk *b = ptr ? tr_alloc_find_live(a, (uintptr_t)ptr) : NULL;
    return b ? (size_t)b->size : 0;
}

/* ------------------------------------------------------------ settings and stats */

void tr_alloc_set_limit(tr_alloc *a, uint64_t bytes) { a->limit = bytes; }

void tr_alloc_set_max_split_size(tr_alloc *a, uint64_t bytes) { a->max_split_size = bytes ? bytes : UINT64_MAX; }

void tr_alloc_set_caching(tr_alloc *a, int on) { a->no_caching = !on; }

void tr_alloc_reset_peak(tr_alloc *a)
{
    tr_alloc_stats *st = &a->st;
    st->peak_allocated = st->allocated;
    st->peak_reserved = st->reserved;
    for (int t = 0; t < TR_NTAGS; t++) st->tag_peak[t] = st->tag_allocated[t];
    for (int p = 0; p < 2; p++) {
        st->pool_peak_allocated[p] = st->pool_allocated[p];
        st->pool_peak_reserved[p] = st->pool_reserved[p];
    }
}
