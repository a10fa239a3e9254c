/* alloc_internal.h — the caching allocator's private data structures, shared by alloc.c
 * (policy, bookkeeping), alloc_check.c (invariant check) and alloc_report.c (OOM
 * message, report, snapshot). Not part of the public API: trainer.h does not include it and nothing
 * outside those two files may use it.
 *
 * Invariants (checked by tr_alloc_check):
 *   - a segment's blocks tile it exactly, in address order, through prev/next, from first
 *     to last;
 *   - no two neighbouring blocks of a segment are both free (they are coalesced);
 *   - every free block is in its pool's treap, keyed by (stream, size, address), and
 *     every live block is in the address hash map; nothing else is in either;
 *   - a block's stream and pool are its segment's;
 *   - stats.allocated/tag/pool/requested equal the sums over live blocks, reserved and
 *     pool_reserved the sums over segments, inactive_split the free bytes of segments
 *     that hold a live block. */
#ifndef TR_ALLOC_INTERNAL_H
#define TR_ALLOC_INTERNAL_H

#include "alloc.h"

#include <stdint.h>

enum { TR_POOL_SMALL = 0, TR_POOL_LARGE = 1 };

enum {
    TR_EV_ALLOC = 0,
    TR_EV_FREE = 1,
    TR_EV_RAW_ALLOC = 2,
    TR_EV_RAW_FREE = 3,
    TR_EV_OOM = 4,
    TR_EV_KINDS = 5
};

#define TR_ALLOC_RING 256

typedef struct tr_seg tr_seg;

/* One block: a piece of a segment, live (handed out) or free (cached). */
typedef struct tr_blk {
    uintptr_t addr;
    uint64_t size;               /* bytes the block spans (rounded; >= the request) */
    uint64_t requested;          /* bytes asked for, live blocks only */
    uintptr_t stream;
    tr_seg *seg;
    struct tr_blk *prev, *next;  /* neighbours in the segment, address order */
    struct tr_blk *left, *right; /* free blocks: the pool treap */
    uint64_t prio;               /* treap heap priority */
    uint64_t sub_max;            /* largest size in this treap subtree */
    struct tr_blk *hnext;        /* live blocks: hash chain; recycled: free-list link */
    int tag;                     /* live blocks: tr_tag */
    int live;
    int pool;
} tr_blk;

/* One raw allocation from the backend, or the growable range (capacity > 0), whose size
 * is the part made usable so far. */
struct tr_seg {
    uintptr_t base;
    uint64_t size;
    uint64_t capacity;           /* the range's reservation; 0 for a segment */
    uint64_t raw_size;           /* bytes asked of the backend: size, or the exact request
                                  * when caching is off */
    uintptr_t stream;
    int pool;
    uint32_t n_live;
    uint64_t live_bytes;
    tr_blk *first, *last;        /* the blocks at its two ends (NULL in an empty range) */
    tr_seg *prev, *next;         /* every segment, most recent first */
};

typedef struct tr_alloc_event {
    uint64_t seq;
    uint64_t size;
    uintptr_t addr;
    uintptr_t stream;
    int kind;                    /* TR_EV_* */
    int tag;                     /* -1 when none */
} tr_alloc_event;

struct tr_alloc {
    tr_raw_backend backend;
    char device_name[32];
    char device_label[320];      /* "cuda:0 (NVIDIA A10, compute capability 8.6)", or the name alone */
    tr_blk *free_tree[2];        /* per pool */
    tr_blk **buckets;            /* live blocks by address */
    size_t n_buckets;            /* power of two */
    tr_blk *spare;               /* recycled block records */
    tr_seg *segs;
    tr_seg *range;               /* the growable range (also in segs), NULL until made */
    int range_refused;           /* the backend has none, or refused to reserve one */
    uint64_t rng;                /* treap priorities */
    uint64_t limit;              /* 0 = none */
    uint64_t max_split_size;     /* UINT64_MAX = none */
    int no_caching;              /* 1: a segment per request, returned at its free */
    tr_alloc_stats st;           /* largest_free, limit, max_split_size filled on read */
    tr_alloc_event ring[TR_ALLOC_RING];
    uint64_t n_events;           /* events ever recorded; the next seq */
};

/* alloc.c */
/* Compares free block b with the key (stream, size, address): <0, 0, >0. */
int tr_alloc_key_cmp(const tr_blk *b, uintptr_t stream, uint64_t size, uintptr_t addr);
/* The live block that starts at addr, or NULL. */
tr_blk *tr_alloc_find_live(const tr_alloc *a, uintptr_t addr);

/* alloc_report.c */
uint64_t tr_alloc_largest_free(const tr_alloc *a);
const char *tr_alloc_event_name(int kind);
/* "0 B", "512 B", "1.50 KiB", "128.00 MiB", "2.00 GiB" into buf (>= 32 bytes). */
const char *tr_alloc_fmt_size(uint64_t bytes, char *buf, size_t len);
/* Fills err with the out-of-memory paragraph and ledger table. in_range: the limit stopped the
 * growable range's growth by seg_size bytes (else a new segment of seg_size bytes failed). */
int tr_alloc_oom_message(const tr_alloc *a, tr_error *err, uint64_t size, uint64_t rounded,
                         uint64_t seg_size, int tag, uintptr_t stream, int hit_limit, int in_range);

#endif
