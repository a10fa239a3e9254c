/* test_alloc_range.c — the caching allocator's growable range (alloc.h), through the public
 * API: the large pool of the first stream lives in one range that grows at its end by what
 * a request lacks; best fit among the holes inside it first, then the free end; the limit, a refused grow or reservation and a
 * full range; emptying the cache returns the free end; and a seeded randomized run checked after every operation against tr_alloc_check and a shadow.
 *
 * The fake backend hands out addresses with no memory behind them (the allocator never
 * touches block memory): segments from a bump pointer, and one range whose usable part it
 * tracks, so that every grow must start at the usable end and every shrink end there. */
#include "check.h"
#include "trainer.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)

typedef struct fake {
    uintptr_t next;          /* segments' bump pointer */
    int n_segs;              /* segments outstanding */
    uint64_t seg_bytes;
    uintptr_t base;          /* the range: base, reservation, usable bytes */
    uint64_t cap, usable;
    uint64_t want_cap;       /* the reservation this backend grants (0: refuses) */
    int n_reserve, n_grow, n_shrink, n_release;
    int refuse_grows;        /* refuse this many coming grows */
    int bad;                 /* a grow or shrink away from the usable end, a wrong release */
} fake;

static void *seg_alloc(void *user, size_t size)
{
    fake *f = user;
    uintptr_t p = f->next;
    f->next += (size + 65535) / 65536 * 65536 + 65536;
    f->n_segs++;
    f->seg_bytes += size;
    return (void *)p;
}

static void seg_free(void *user, void *ptr, size_t size)
{
    fake *f = user;
    (void)ptr;
    f->n_segs--;
    f->seg_bytes -= size;
}

static void *range_reserve(void *user, uint64_t *size)
{
    fake *f = user;
    f->n_reserve++;
    if (!f->want_cap) return NULL;
    f->base = (uintptr_t)1 << 46;
    f->cap = *size < f->want_cap ? *size : f->want_cap;
    *size = f->cap;
    return (void *)f->base;
}

static int range_grow(void *user, void *base, uint64_t from, uint64_t to)
{
    fake *f = user;
    if ((uintptr_t)base != f->base || from != f->usable || to > f->cap || to <= from) f->bad++;
    if (f->refuse_grows > 0) {
        f->refuse_grows--;
        return -1;
    }
    f->n_grow++;
    f->usable = to;
    return 0;
}

static int range_shrink(void *user, void *base, uint64_t from, uint64_t to)
{
    fake *f = user;
    if ((uintptr_t)base != f->base || to != f->usable || from >= to || from % (2 * MiB)) f->bad++;
    f->n_shrink++;
    f->usable = from;
    return 0;
}

static void range_release(void *user, void *base, uint64_t size)
{
    fake *f = user;
    if ((uintptr_t)base != f->base || size != f->cap) f->bad++;
    f->n_release++;
}

/* An allocator over a fake whose range holds up to cap bytes (0: reservations refused). */
static tr_alloc *fake_new(fake *f, uint64_t cap)
{
    memset(f, 0, sizeof *f);
    f->next = (uintptr_t)1 << 44;
    f->want_cap = cap;
    tr_raw_backend b = { seg_alloc, seg_free, f, "fake", NULL, NULL,
                         range_reserve, range_grow, range_shrink, range_release };
    return tr_alloc_new(&b);
}

static tr_alloc_stats stats(const tr_alloc *a)
{
    tr_alloc_stats s;
    tr_alloc_get_stats(a, &s);
    return s;
}

static uintptr_t must_alloc(tr_alloc *a, uint64_t size, uintptr_t stream)
{
    void *p = NULL;
    tr_error e;
    tr_error_clear(&e);
    int rc = tr_alloc_malloc(a, (size_t)size, TR_TAG_ACTIVATIONS, stream, &p, &e);
    CHECK(rc == TR_OK && p, "alloc %llu failed: %s", (unsigned long long)size, e.msg);
    return (uintptr_t)p;
}

static void check_ok(const tr_alloc *a)
{
    tr_error e;
    tr_error_clear(&e);
    CHECK(tr_alloc_check(a, &e) == TR_OK, "%s", e.msg);
}

static void release(tr_alloc *a, uintptr_t p) { tr_alloc_free(a, (void *)p); }

/* The end of a case: n blocks freed, the invariants, the allocator destroyed, and every grow
 * and shrink the backend saw at the range's usable end. */
static void release_and_destroy(tr_alloc *a, const fake *f, const uintptr_t *blocks, int n)
{
    for (int i = 0; i < n; i++) release(a, blocks[i]);
    check_ok(a);
    tr_alloc_destroy(a);
    CHECK(f->bad == 0, "a grow or shrink away from the usable end, or a wrong release");
}

/* The pattern a segment strands: a [N, 4C] temporary freed, a kept [N, C] placed in its
 * block, the next [N, 4C]: the range grows by what its free end lacks, not by a whole block. */
static void test_grows_by_what_is_missing(void)
{
    fake f;
    tr_alloc *a = fake_new(&f, 1024 * MiB);
    uintptr_t t1 = must_alloc(a, 50 * MiB, 0);
    CHECK(t1 == f.base && f.usable == 50 * MiB && f.n_segs == 0, "the first large block opens the range");
    release(a, t1);
    uintptr_t kept = must_alloc(a, 12 * MiB, 0);
    CHECK(kept == f.base && f.usable == 50 * MiB, "best fit inside the range before growing");
    uintptr_t t2 = must_alloc(a, 50 * MiB, 0);
    tr_alloc_stats s = stats(a);
    CHECK(t2 == f.base + 12 * MiB && f.usable == 62 * MiB && s.reserved == 62 * MiB,
          "the free end (38 MiB) grew by 12 MiB: reserved %llu", (unsigned long long)s.reserved);
    CHECK(s.pool_reserved[1] == 62 * MiB && s.n_segments == 1 && f.n_reserve == 1, "one range, one reservation");
    /* a request that does not fill a 2 MiB step: the step's rest stays a free block at the end */
    uintptr_t odd = must_alloc(a, 2 * MiB + 512, 0);
    CHECK(odd == f.base + 62 * MiB && f.usable == 66 * MiB, "grown in 2 MiB steps: usable %llu",
          (unsigned long long)f.usable);
    uintptr_t fill = must_alloc(a, MiB + 512, 0);
    CHECK(fill == odd + 2 * MiB + 512 && f.usable == 66 * MiB, "the step's free rest served the next request");
    /* small requests keep their 2 MiB segments; another stream's large ones get segments */
    uintptr_t small = must_alloc(a, 4 * KiB, 0), other = must_alloc(a, 30 * MiB, 7);
    CHECK(f.n_segs == 2 && f.seg_bytes == 2 * MiB + 30 * MiB, "segments: %d, %llu bytes", f.n_segs,
          (unsigned long long)f.seg_bytes);
    check_ok(a);
    /* the snapshot marks the range among the segments */
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_alloc_range_%d.json", (int)getpid());
    tr_error e;
    CHECK(tr_alloc_snapshot(a, path, &e) == TR_OK, "%s", e.msg);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je), *sg;
    size_t i;
    int growable = 0, n = 0;
    json_array_foreach(json_object_get(root, "segments"), i, sg) {
        n++;
        if (json_is_true(json_object_get(sg, "growable"))) {
            growable++;
            CHECK(json_integer_value(json_object_get(sg, "size")) == (json_int_t)(66 * MiB), "the range's usable size");
        }
    }
    CHECK(root && n == 3 && growable == 1, "3 segments, 1 growable: %d, %d", n, growable);
    json_decref(root);
    unlink(path);
    release(a, kept);
    release(a, t2);
    release(a, odd);
    release(a, fill);
    release(a, small);
    release(a, other);
    check_ok(a);
    tr_alloc_empty_cache(a);
    s = stats(a);
    CHECK(s.reserved == 0 && f.usable == 0 && f.n_segs == 0, "emptying the cache returns the whole free range");
    uintptr_t again = must_alloc(a, 20 * MiB, 0);
    CHECK(again == f.base && f.usable == 20 * MiB, "the range grows again from its base");
    release(a, again);
    check_ok(a);
    tr_alloc_destroy(a);
    CHECK(f.n_release == 1 && f.bad == 0, "the reservation returned once; every grow and shrink at the end");
}

/* A hole inside the range that fits serves before the free end, even where the end fits
 * tighter: the end is the block that can grow. When no hole fits, the end grows. */
static void test_holes_before_the_end(void)
{
    fake f;
    tr_alloc *a = fake_new(&f, 1024 * MiB);
    uintptr_t x = must_alloc(a, 30 * MiB, 0), kept = must_alloc(a, 4 * MiB, 0), y = must_alloc(a, 10 * MiB, 0);
    release(a, x);
    release(a, y);   /* a 30 MiB hole, then the kept block, then a 10 MiB free end */
    uintptr_t p = must_alloc(a, 8 * MiB, 0), q = must_alloc(a, 12 * MiB, 0);
    CHECK(p == f.base && q == f.base + 8 * MiB && f.usable == 44 * MiB, "the hole served both: usable %llu",
          (unsigned long long)f.usable);
    uintptr_t r = must_alloc(a, 25 * MiB, 0);   /* 10 MiB left in the hole: the end grows by 16 MiB */
    CHECK(r == kept + 4 * MiB && f.usable == 60 * MiB && stats(a).reserved == 60 * MiB, "the end grew: usable %llu",
          (unsigned long long)f.usable);
    release_and_destroy(a, &f, (uintptr_t[]){ p, q, r, kept }, 4);
}

/* empty_cache returns the range's free end from the first 2 MiB boundary in its last block
 * on, and nothing while the last block is live. */
static void test_trim(void)
{
    fake f;
    tr_alloc *a = fake_new(&f, 1024 * MiB);
    /* x leaves 1 MiB + 512 B of its 12 MiB step free; y takes that and 20 MiB more */
    uintptr_t x = must_alloc(a, 11 * MiB - 512, 0), y = must_alloc(a, 20 * MiB, 0);
    CHECK(f.usable == 32 * MiB && y == x + 11 * MiB - 512, "usable %llu", (unsigned long long)f.usable);
    tr_alloc_empty_cache(a);
    CHECK(f.usable == 32 * MiB && f.n_shrink == 0, "a live last block keeps the end");
    release(a, y);
    tr_alloc_empty_cache(a);
    tr_alloc_stats s = stats(a);
    CHECK(f.usable == 12 * MiB && s.reserved == 12 * MiB, "trimmed to the boundary past x: %llu",
          (unsigned long long)f.usable);
    CHECK(s.allocated == 11 * MiB - 512 && s.inactive_split == MiB + 512,
          "the free bytes before the boundary stay: inactive %llu", (unsigned long long)s.inactive_split);
    check_ok(a);
    uintptr_t z = must_alloc(a, 5 * MiB, 0);
    CHECK(z == x + 11 * MiB - 512 && f.usable == 16 * MiB, "the free end grown by 4 MiB: usable %llu",
          (unsigned long long)f.usable);
    release(a, x);
    release(a, z);
    tr_alloc_empty_cache(a);
    CHECK(f.usable == 0 && stats(a).reserved == 0 && stats(a).inactive_split == 0, "all returned");
    check_ok(a);
    tr_alloc_destroy(a);
    CHECK(f.bad == 0, "grows and shrinks at the end");
}

/* The limit: a grow past it empties the cache (the range's free end too) and tries once more;
 * then out of memory, naming the limit, with the allocator still usable. */
static void test_limit(void)
{
    fake f;
    tr_alloc *a = fake_new(&f, 1024 * MiB);
    tr_alloc_set_limit(a, 64 * MiB);
    uintptr_t x = must_alloc(a, 40 * MiB, 0), y = must_alloc(a, 20 * MiB, 0);
    release(a, y);
    void *p = (void *)1;
    tr_error e;
    tr_error_clear(&e);
    int rc = tr_alloc_malloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0, &p, &e);
    CHECK(rc == TR_EOOM && p == NULL && strstr(e.msg, "out of memory"), "past the limit: rc %d, %s", rc, e.msg);
    CHECK(strstr(e.msg, "Growing the range that holds the large blocks by 30.00 MiB would pass the limit") &&
              strstr(e.msg, "24.00 MiB of headroom"),
          "the message names the range's growth and the headroom: %s", e.msg);
    tr_alloc_stats s = stats(a);
    CHECK(s.n_retries == 1 && s.n_ooms == 1 && s.reserved == 40 * MiB && f.usable == 40 * MiB,
          "the retry trimmed the free end: reserved %llu", (unsigned long long)s.reserved);
    uintptr_t z = must_alloc(a, 24 * MiB, 0);
    CHECK(z == x + 40 * MiB && stats(a).reserved == 64 * MiB, "up to the limit still grows");
    release_and_destroy(a, &f, (uintptr_t[]){ x, z }, 2);
}

/* A refused grow, a full range and a refused reservation: segments serve instead. */
static void test_fallbacks(void)
{
    fake f;
    tr_alloc *a = fake_new(&f, 64 * MiB);
    uintptr_t x = must_alloc(a, 60 * MiB, 0);
    uintptr_t y = must_alloc(a, 20 * MiB, 0);   /* 4 MiB left in the range: a segment */
    CHECK(x == f.base && f.n_segs == 1 && f.seg_bytes == 20 * MiB && y != f.base + 60 * MiB,
          "a full range leaves the request to a segment");
    f.refuse_grows = 1;
    uintptr_t z = must_alloc(a, 2 * MiB, 0);    /* refused grow: a block of a 20 MiB segment */
    CHECK(f.n_segs == 2 && f.seg_bytes == 40 * MiB && (z < f.base || z >= f.base + f.cap),
          "a refused grow leaves the request to a segment: %d segments, %llu bytes", f.n_segs,
          (unsigned long long)f.seg_bytes);
    CHECK(f.usable == 60 * MiB && stats(a).reserved == 100 * MiB, "the refused grow left the range as it was");
    release_and_destroy(a, &f, (uintptr_t[]){ x, y, z }, 3);
    CHECK(f.n_segs == 0, "all returned");

    tr_alloc *b = fake_new(&f, 0);
    uintptr_t p = must_alloc(b, 30 * MiB, 0), q = must_alloc(b, 30 * MiB, 0);
    CHECK(f.n_reserve == 1 && f.n_segs == 2 && stats(b).reserved == 60 * MiB,
          "a refused reservation is asked once; segments serve");
    release(b, p);
    release(b, q);
    check_ok(b);
    tr_alloc_destroy(b);
    CHECK(f.n_release == 0 && f.n_segs == 0, "nothing to release");
}

/* Random frees, requests of 1 KiB - 40 MiB on two streams, cache empties, limit switches and
 * refused grows; after each operation: the invariants, no overlap, every block inside the
 * usable range or a segment's bytes, and reserved = the range's usable bytes + segments. */
static void test_randomized(void)
{
    enum { CAP = 300 };
    static uintptr_t live[CAP];
    static uint64_t live_size[CAP];
    int n_live = 0;
    fake f;
    tr_alloc *a = fake_new(&f, 2048 * MiB);
    uint64_t rng = 0xC0FFEE;
    uint64_t ooms = 0, grows_refused = 0;
    int failed_before = check_case_failed;
    for (int op = 0; op < 40000 && check_case_failed == failed_before; op++) {
        uint64_t r = check_xorshift(&rng) % 1000;
        if (r < 5) {
            tr_alloc_empty_cache(a);
        } else if (r < 8) {
            tr_alloc_set_limit(a, stats(a).limit ? 0 : (512 + check_xorshift(&rng) % 1024) * MiB);
        } else if (r < 12) {
            f.refuse_grows = 1;
            grows_refused++;
        } else if (n_live == CAP || (n_live > 0 && r < 480)) {
            int k = (int)(check_xorshift(&rng) % (uint64_t)n_live);
            release(a, live[k]);
            live[k] = live[--n_live];
            live_size[k] = live_size[n_live];
        } else {
            uint64_t size = KiB << (check_xorshift(&rng) % 16);
            size += check_xorshift(&rng) % size;
            uintptr_t stream = check_xorshift(&rng) % 4 ? 0 : 0x7f00;
            void *p = NULL;
            tr_error e;
            tr_error_clear(&e);
            int rc = tr_alloc_malloc(a, (size_t)size, TR_TAG_ACTIVATIONS, stream, &p, &e);
            if (rc == TR_EOOM) {
                ooms++;
                CHECK(p == NULL && strstr(e.msg, "out of memory"), "OOM message: %s", e.msg);
            } else {
                CHECK(rc == TR_OK && p, "alloc %llu: %s", (unsigned long long)size, e.msg);
                if (!p) break;
                uint64_t bs = tr_alloc_block_size(a, p);
                for (int k = 0; k < n_live; k++)
                    CHECK((uintptr_t)p + bs <= live[k] || live[k] + live_size[k] <= (uintptr_t)p, "op %d: overlap", op);
                int in_range = (uintptr_t)p >= f.base && (uintptr_t)p + bs <= f.base + f.usable;
                CHECK(in_range || (uintptr_t)p < f.next, "op %d: a block outside the range's usable part", op);
                live[n_live] = (uintptr_t)p;
                live_size[n_live++] = bs;
            }
        }
        tr_error e;
        tr_error_clear(&e);
        CHECK(tr_alloc_check(a, &e) == TR_OK, "op %d: %s", op, e.msg);
        tr_alloc_stats s = stats(a);
        CHECK(s.reserved == f.usable + f.seg_bytes, "op %d: reserved %llu, range %llu + segments %llu", op,
              (unsigned long long)s.reserved, (unsigned long long)f.usable, (unsigned long long)f.seg_bytes);
    }
    CHECK(ooms > 0, "the run reached the limit");
    for (int k = 0; k < n_live; k++) release(a, live[k]);
    tr_alloc_empty_cache(a);
    CHECK(stats(a).reserved == 0 && f.usable == 0 && f.n_segs == 0, "everything returned at the end");
    check_ok(a);
    tr_alloc_destroy(a);
    CHECK(f.bad == 0 && f.n_reserve == 1, "grows and shrinks at the end, one reservation (%llu refused grows)",
          (unsigned long long)grows_refused);
}

int main(void)
{
    RUN(test_grows_by_what_is_missing);
    RUN(test_holes_before_the_end);
    RUN(test_trim);
    RUN(test_limit);
    RUN(test_fallbacks);
    RUN(test_randomized);
    return check_done();
}
