/* test_alloc.c — the caching allocator through its public API only: rounding and pools,
 * splitting and coalescing, best fit, max_split_size, streams, the limit and the OOM
 * message, release-and-retry, empty_cache, reset_peak, report, snapshot, the CPU
 * backend (its segments and its growable range), and a seeded randomized run of 100,000+
 * operations checked after every operation against tr_alloc_check and a shadow model.
 *
 * Most cases use a fake raw backend that hands out address ranges without memory
 * behind them (the allocator never touches block memory), so 64 MiB requests cost
 * nothing, and that keeps its own record of outstanding segments to compare with. */
#include "check.h"
#include "trainer.h"

#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* ------------------------------------------------------------ fake backend */

typedef struct range {
    uintptr_t base;
    size_t size;
} range;

typedef struct fake {
    uintptr_t next;        /* bump pointer; a 64 KiB gap separates segments */
    range live[4096];
    int n_live;
    uint64_t live_bytes;
    int fail_next;         /* refuse this many coming raw_alloc calls */
    double fail_rate;      /* and, with rng, refuse this fraction at random */
    uint64_t rng;
    uint64_t n_alloc, n_free, n_refused, bad_frees;
} fake;

static void *fake_alloc(void *user, size_t size)
{
    fake *f = user;
    if (f->fail_next > 0 || (f->fail_rate > 0 && (double)(check_xorshift(&f->rng) % 1000000) < f->fail_rate * 1e6) ||
        f->n_live == (int)(sizeof f->live / sizeof f->live[0])) {
        if (f->fail_next > 0) f->fail_next--;
        f->n_refused++;
        return NULL;
    }
    uintptr_t base = f->next;
    f->next += (size + 65535) / 65536 * 65536 + 65536;
    f->live[f->n_live++] = (range){ base, size };
    f->live_bytes += size;
    f->n_alloc++;
    return (void *)base;
}

static void fake_free(void *user, void *ptr, size_t size)
{
    fake *f = user;
    for (int i = 0; i < f->n_live; i++) {
        if (f->live[i].base == (uintptr_t)ptr) {
            if (f->live[i].size != size) f->bad_frees++;
            f->live_bytes -= f->live[i].size;
            f->live[i] = f->live[--f->n_live];
            f->n_free++;
            return;
        }
    }
    f->bad_frees++;
}

static int fake_holds(const fake *f, uintptr_t p, size_t size)
{
    for (int i = 0; i < f->n_live; i++)
        if (p >= f->live[i].base && p + size <= f->live[i].base + f->live[i].size) return 1;
    return 0;
}

static tr_alloc *fake_new(fake *f)
{
    memset(f, 0, sizeof *f);
    f->next = (uintptr_t)1 << 44;
    f->rng = 88172645463325252ull;
    tr_raw_backend b = { .raw_alloc = fake_alloc, .raw_free = fake_free, .user = f, .device_name = "fake" };
    return tr_alloc_new(&b);
}

static tr_alloc_stats stats(const tr_alloc *a)
{
    tr_alloc_stats s;
    tr_alloc_get_stats(a, &s);
    return s;
}

static void *must_alloc(tr_alloc *a, size_t size, int tag, uintptr_t stream)
{
    void *p = NULL;
    tr_error e;
    tr_error_clear(&e);
    int rc = tr_alloc_malloc(a, size, tag, stream, &p, &e);
    CHECK(rc == TR_OK && p, "alloc %zu failed: %s", size, e.msg);
    return p;
}

static void check_ok(const tr_alloc *a)
{
    tr_error e;
    tr_error_clear(&e);
    CHECK(tr_alloc_check(a, &e) == TR_OK, "%s", e.msg);
}

/* The end of a case: the allocator's invariants hold, then it is destroyed. */
static void check_ok_and_destroy(tr_alloc *a)
{
    check_ok(a);
    tr_alloc_destroy(a);
}

/* ------------------------------------------------------------ rounding and pools */

static void test_rounding_and_pools(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    void *z1 = must_alloc(a, 0, TR_TAG_WORKSPACE, 0), *z2 = must_alloc(a, 0, TR_TAG_WORKSPACE, 0);
    CHECK(z1 != z2, "two size-0 blocks must differ");
    CHECK(tr_alloc_block_size(a, z1) == 512, "size 0 -> %zu", tr_alloc_block_size(a, z1));
    void *p1 = must_alloc(a, 1, TR_TAG_WEIGHTS, 0);
    void *p513 = must_alloc(a, 513, TR_TAG_WEIGHTS, 0);
    CHECK(tr_alloc_block_size(a, p1) == 512, "1 -> %zu", tr_alloc_block_size(a, p1));
    CHECK(tr_alloc_block_size(a, p513) == 1024, "513 -> %zu", tr_alloc_block_size(a, p513));
    tr_alloc_stats s = stats(a);
    CHECK(s.reserved == 2 * MiB && s.pool_reserved[0] == 2 * MiB && s.n_segments == 1,
          "small requests share one 2 MiB segment: reserved %llu", (unsigned long long)s.reserved);
    CHECK(s.requested == 514 && s.allocated == 2560, "requested %llu allocated %llu",
          (unsigned long long)s.requested, (unsigned long long)s.allocated);

    void *m1 = must_alloc(a, MiB, TR_TAG_ACTIVATIONS, 0); /* exactly 1 MiB: still small */
    s = stats(a);
    CHECK(s.pool_allocated[0] == 2560 + MiB && s.pool_reserved[1] == 0, "1 MiB is small: small alloc %llu",
          (unsigned long long)s.pool_allocated[0]);
    void *l1 = must_alloc(a, MiB + 1, TR_TAG_ACTIVATIONS, 0); /* large pool, 20 MiB segment, split */
    s = stats(a);
    CHECK(s.pool_reserved[1] == 20 * MiB, "1 MiB + 1 takes a 20 MiB segment: %llu",
          (unsigned long long)s.pool_reserved[1]);
    CHECK(tr_alloc_block_size(a, l1) == MiB + 512, "1 MiB + 1 -> %zu", tr_alloc_block_size(a, l1));
    void *l10 = must_alloc(a, 10 * MiB, TR_TAG_ACTIVATIONS, 0); /* fits the 20 MiB segment's rest */
    CHECK(stats(a).pool_reserved[1] == 20 * MiB, "10 MiB served from the cached remainder");
    tr_alloc_free(a, l10);
    tr_alloc_free(a, l1);
    tr_alloc_empty_cache(a);
    CHECK(stats(a).pool_reserved[1] == 0, "large segment released");
    l10 = must_alloc(a, 10 * MiB, TR_TAG_ACTIVATIONS, 0); /* >= 10 MiB: own segment rounded to 2 MiB */
    CHECK(stats(a).pool_reserved[1] == 10 * MiB, "10 MiB segment: %llu",
          (unsigned long long)stats(a).pool_reserved[1]);
    void *l11 = must_alloc(a, 11 * MiB + 1, TR_TAG_ACTIVATIONS, 0); /* 12 MiB segment, rest < 1 MiB: whole */
    CHECK(stats(a).pool_reserved[1] == 22 * MiB, "12 MiB segment");
    CHECK(tr_alloc_block_size(a, l11) == 12 * MiB, "remainder <= 1 MiB is not split: %zu",
          tr_alloc_block_size(a, l11));
    void *l9 = must_alloc(a, 10 * MiB - 512, TR_TAG_GRADS, 0); /* below 10 MiB: 20 MiB segment */
    CHECK(stats(a).pool_reserved[1] == 42 * MiB, "just under 10 MiB takes 20 MiB: %llu",
          (unsigned long long)stats(a).pool_reserved[1]);
    /* a small block is split even when only 512 B remain */
    tr_alloc_empty_cache(a);
    uint64_t seg_before = stats(a).n_segments;
    void *h1 = must_alloc(a, MiB, TR_TAG_WORKSPACE, 5), *h2 = must_alloc(a, MiB - 512, TR_TAG_WORKSPACE, 5);
    void *h3 = must_alloc(a, 1, TR_TAG_WORKSPACE, 5);
    CHECK(tr_alloc_block_size(a, h2) == MiB - 512 && h3 == (char *)h2 + MiB - 512 &&
          stats(a).n_segments == seg_before + 1, "512 B remainder split off and reused: %zu",
          tr_alloc_block_size(a, h2));
    tr_alloc_free(a, h1);
    tr_alloc_free(a, h2);
    tr_alloc_free(a, h3);
    void *ptrs[] = { z1, z2, p1, p513, m1, l10, l11, l9 };
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        CHECK((uintptr_t)ptrs[i] % 256 == 0, "pointer %zu not 256-aligned", i);
    CHECK(tr_alloc_block_size(a, (char *)m1 + 512) == 0, "interior pointer is not a live block");
    check_ok_and_destroy(a);
    CHECK(f.n_live == 0 && f.bad_frees == 0, "destroy returns every segment: %d left, %llu bad",
          f.n_live, (unsigned long long)f.bad_frees);
}

/* ------------------------------------------------------------ split, coalesce, best fit */

static void test_split_coalesce(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    char *x = must_alloc(a, 512 * KiB, TR_TAG_WEIGHTS, 0);
    char *y = must_alloc(a, 512 * KiB, TR_TAG_WEIGHTS, 0);
    char *z = must_alloc(a, 512 * KiB, TR_TAG_WEIGHTS, 0);
    CHECK(y == x + 512 * KiB && z == y + 512 * KiB, "blocks are carved in address order");
    tr_alloc_stats s = stats(a);
    CHECK(s.n_segments == 1 && s.largest_free == 512 * KiB && s.inactive_split == 512 * KiB,
          "one segment, 512 KiB tail: largest %llu inactive %llu", (unsigned long long)s.largest_free,
          (unsigned long long)s.inactive_split);
    tr_alloc_free(a, y);
    CHECK(stats(a).inactive_split == MiB, "hole + tail inactive: %llu", (unsigned long long)stats(a).inactive_split);
    tr_alloc_free(a, x); /* coalesces with y's hole */
    CHECK(stats(a).largest_free == MiB, "x+y coalesced into 1 MiB: %llu", (unsigned long long)stats(a).largest_free);
    check_ok(a);
    char *w = must_alloc(a, MiB, TR_TAG_GRADS, 0);
    CHECK(w == x, "1 MiB fits only the coalesced x+y hole");
    tr_alloc_free(a, w);
    tr_alloc_free(a, z); /* coalesces both sides: one free block = the segment */
    s = stats(a);
    CHECK(s.largest_free == 2 * MiB && s.inactive_split == 0 && s.allocated == 0, "all coalesced: largest %llu",
          (unsigned long long)s.largest_free);
    check_ok(a);

    /* best fit: the smallest hole that fits, not the first */
    char *p[6];
    size_t sz[6] = { 256 * KiB, 512 * KiB, 256 * KiB, 256 * KiB, 256 * KiB, 512 * KiB };
    for (int i = 0; i < 6; i++) p[i] = must_alloc(a, sz[i], TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, p[1]); /* 512 KiB hole */
    tr_alloc_free(a, p[3]); /* 256 KiB hole */
    char *q = must_alloc(a, 200 * KiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(q == p[3], "200 KiB goes to the 256 KiB hole");
    char *r = must_alloc(a, 300 * KiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(r == p[1], "300 KiB goes to the 512 KiB hole");
    CHECK(tr_alloc_block_size(a, q) == 200 * KiB, "small blocks split to the rounded size");
    check_ok(a);

    /* large pool: split only when the rest is > 1 MiB */
    char *l = must_alloc(a, 2 * MiB + 1, TR_TAG_ACTIVATIONS, 0);
    CHECK(tr_alloc_block_size(a, l) == 2 * MiB + 512, "large split: %zu", tr_alloc_block_size(a, l));
    size_t rest = 20 * MiB - (2 * MiB + 512);
    char *l2 = must_alloc(a, rest - 1 * MiB, TR_TAG_ACTIVATIONS, 0); /* rest exactly 1 MiB: not split */
    CHECK(l2 == l + 2 * MiB + 512 && tr_alloc_block_size(a, l2) == rest, "rest of 1 MiB stays whole: %zu",
          tr_alloc_block_size(a, l2));
    check_ok_and_destroy(a);
}

/* ------------------------------------------------------------ max_split_size */

static void test_max_split(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    tr_alloc_set_max_split_size(a, 8 * MiB);
    CHECK(stats(a).max_split_size == 8 * MiB, "setting shows in stats");
    void *big = must_alloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, big); /* a cached 30 MiB oversize block */
    void *small = must_alloc(a, 2 * MiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(small != big && stats(a).reserved == 50 * MiB, "an oversize block does not serve a small request: %llu",
          (unsigned long long)stats(a).reserved);
    /* the 2 MiB request split its fresh 20 MiB segment (2 MiB < max_split_size); the
     * 18 MiB rest is oversize and is the best fit for a 12 MiB (oversize) request */
    char *mid = must_alloc(a, 12 * MiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(mid == (char *)small + 2 * MiB && tr_alloc_block_size(a, mid) == 18 * MiB,
          "oversize request takes the oversize block whole (no split): %zu", tr_alloc_block_size(a, mid));
    void *again = must_alloc(a, 25 * MiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(again == big && tr_alloc_block_size(a, again) == 30 * MiB, "30 MiB block served whole: %zu",
          tr_alloc_block_size(a, again));
    tr_alloc_free(a, again);
    void *nine = must_alloc(a, 9 * MiB, TR_TAG_ACTIVATIONS, 0); /* 30 >= 9 + 20: too wasteful */
    CHECK(nine != big && tr_alloc_block_size(a, nine) == 20 * MiB && stats(a).reserved == 70 * MiB,
          "block >= request + 20 MiB not used; new 20 MiB segment not split: %zu", tr_alloc_block_size(a, nine));
    check_ok_and_destroy(a);

    /* the same sequence without max_split_size reuses and splits the big block */
    a = fake_new(&f);
    big = must_alloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, big);
    small = must_alloc(a, 2 * MiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(small == big && tr_alloc_block_size(a, small) == 2 * MiB && stats(a).reserved == 30 * MiB,
          "without max_split_size the cached block is split");
    CHECK(stats(a).max_split_size == UINT64_MAX, "default is none");
    check_ok_and_destroy(a);
}

/* ------------------------------------------------------------ streams */

static void test_streams(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    void *s1 = must_alloc(a, 4 * MiB, TR_TAG_WORKSPACE, 1);
    tr_alloc_free(a, s1);
    void *s2 = must_alloc(a, 4 * MiB, TR_TAG_WORKSPACE, 2);
    CHECK(s2 != s1 && stats(a).n_segments == 2, "a block freed on stream 1 is not reused on stream 2");
    void *s1b = must_alloc(a, 4 * MiB, TR_TAG_WORKSPACE, 1);
    CHECK(s1b == s1 && stats(a).n_segments == 2, "it is reused on stream 1");
    void *t1 = must_alloc(a, 1000, TR_TAG_WORKSPACE, 1), *t2 = must_alloc(a, 1000, TR_TAG_WORKSPACE, 2);
    CHECK(stats(a).pool_reserved[0] == 4 * MiB, "small pool: one segment per stream");
    tr_alloc_free(a, t1);
    tr_alloc_free(a, t2);
    tr_alloc_free(a, s2);
    tr_alloc_free(a, s1b);
    check_ok_and_destroy(a);
}

/* ------------------------------------------------------------ limit and OOM */

static void test_limit_oom(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    tr_alloc_set_limit(a, 64 * MiB);
    void *w = must_alloc(a, 4 * MiB, TR_TAG_WEIGHTS, 0);  /* 20 MiB segment */
    void *g = must_alloc(a, 1 * MiB, TR_TAG_GRADS, 0);    /* 2 MiB small segment */
    void *act = must_alloc(a, 40 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, act); /* cached: reserved 62 MiB */
    CHECK(stats(a).reserved == 62 * MiB, "reserved %llu", (unsigned long long)stats(a).reserved);
    void *p = (void *)1;
    tr_error e;
    tr_error_clear(&e);
    int rc = tr_alloc_malloc(a, 128 * MiB, TR_TAG_ACTIVATIONS, 0, &p, &e);
    CHECK(rc == TR_EOOM && e.status == TR_EOOM && p == NULL, "rc %d", rc);
    const char *words[] = { "out of memory", "limit", "reserved", "allocated", "largest free block",
                            "128.00 MiB", "64.00 MiB", "weights 4.00 MiB", "grads 1.00 MiB", "optimizer 0 B",
                            "activations 0 B", "workspace 0 B", "peak 40.00 MiB", "fake", "max_split_size",
                            "precision", "checkpoint", "lora" };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        CHECK(strstr(e.msg, words[i]), "message lacks '%s': %s", words[i], e.msg);
    tr_alloc_stats s = stats(a);
    CHECK(s.n_ooms == 1 && s.n_retries == 1, "ooms %llu retries %llu", (unsigned long long)s.n_ooms,
          (unsigned long long)s.n_retries);
    CHECK(s.reserved == 22 * MiB && f.live_bytes == 22 * MiB, "the retry released the cached 40 MiB: %llu",
          (unsigned long long)s.reserved);
    check_ok(a);
    /* still usable, within the limit */
    void *ok = must_alloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0);
    CHECK(stats(a).reserved == 52 * MiB, "allocator usable after OOM");
    /* a limit below reserved stops growth but not reuse */
    tr_alloc_free(a, ok);
    tr_alloc_set_limit(a, MiB);
    ok = must_alloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, ok);
    rc = tr_alloc_malloc(a, 256 * KiB, TR_TAG_WORKSPACE, 7, &p, &e); /* new stream: needs a segment */
    CHECK(rc == TR_EOOM, "growth past a lowered limit fails");
    tr_alloc_set_limit(a, 0);
    ok = must_alloc(a, 256 * KiB, TR_TAG_WORKSPACE, 7);
    CHECK(stats(a).limit == 0, "limit removed");
    /* a tag outside the enum is a user error */
    CHECK(tr_alloc_malloc(a, 16, 9, 0, &p, &e) == TR_EUSER && strstr(e.msg, "tag"), "bad tag: %s", e.msg);
    tr_alloc_free(a, ok);
    tr_alloc_free(a, w);
    tr_alloc_free(a, g);
    check_ok_and_destroy(a);
}

/* ------------------------------------------------------------ retry on raw failure */

static void test_retry(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    void *keep = must_alloc(a, 64 * KiB, TR_TAG_WEIGHTS, 0);
    void *c1 = must_alloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0), *c2 = must_alloc(a, 12 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, c1);
    tr_alloc_free(a, c2);
    CHECK(f.n_live == 3, "three segments");
    f.fail_next = 1;
    void *big = must_alloc(a, 50 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_stats s = stats(a);
    CHECK(s.n_retries == 1 && s.n_ooms == 0 && f.n_refused == 1, "retries %llu ooms %llu refused %llu",
          (unsigned long long)s.n_retries, (unsigned long long)s.n_ooms, (unsigned long long)f.n_refused);
    CHECK(s.n_raw_free == 2 && f.n_live == 2 && s.reserved == 52 * MiB && f.live_bytes == 52 * MiB,
          "both cached segments were released before the retry: raw frees %llu, reserved %llu",
          (unsigned long long)s.n_raw_free, (unsigned long long)s.reserved);
    CHECK(tr_alloc_block_size(a, keep) == 64 * KiB, "a live block survives the release");
    tr_alloc_free(a, big);
    f.fail_next = 2; /* refused twice: out of memory */
    void *p = NULL;
    tr_error e;
    tr_error_clear(&e);
    CHECK(tr_alloc_malloc(a, 100 * MiB, TR_TAG_GRADS, 0, &p, &e) == TR_EOOM, "second refusal is OOM");
    CHECK(strstr(e.msg, "refused") && strstr(e.msg, "limit none"), "reason named: %s", e.msg);
    CHECK(stats(a).n_retries == 2 && stats(a).n_ooms == 1 && f.n_live == 1, "released the freed 50 MiB too");
    p = must_alloc(a, 100 * MiB, TR_TAG_GRADS, 0);
    tr_alloc_free(a, p);
    tr_alloc_free(a, keep);
    check_ok_and_destroy(a);
    CHECK(f.n_live == 0 && f.bad_frees == 0, "clean destroy");
}

/* ------------------------------------------------------------ empty_cache, reset_peak */

static void test_empty_cache(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    void *A = must_alloc(a, 12 * MiB, TR_TAG_WEIGHTS, 0);     /* segment A: live */
    void *B = must_alloc(a, 14 * MiB, TR_TAG_WEIGHTS, 0);     /* segment B: freed */
    void *C = must_alloc(a, 100 * KiB, TR_TAG_GRADS, 0);      /* small segment C: live + free part */
    void *D = must_alloc(a, 100 * KiB, TR_TAG_GRADS, 1);      /* small segment D (stream 1): freed */
    tr_alloc_free(a, B);
    tr_alloc_free(a, D);
    CHECK(f.n_live == 4, "four segments");
    tr_alloc_empty_cache(a);
    tr_alloc_stats s = stats(a);
    CHECK(f.n_live == 2 && s.n_raw_free == 2 && s.n_segments == 2, "exactly the two empty segments released");
    CHECK(fake_holds(&f, (uintptr_t)A, 12 * MiB) && fake_holds(&f, (uintptr_t)C, 100 * KiB),
          "segments with live blocks kept");
    CHECK(s.reserved == 14 * MiB && f.live_bytes == 14 * MiB, "reserved %llu", (unsigned long long)s.reserved);
    CHECK(f.bad_frees == 0, "sizes given back match");
    tr_alloc_empty_cache(a);
    CHECK(stats(a).n_raw_free == 2, "a second empty_cache releases nothing");
    check_ok(a);
    tr_alloc_free(a, A);
    tr_alloc_free(a, C);
    tr_alloc_destroy(a);
}

static void test_reset_peak(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    void *k = must_alloc(a, 1 * MiB, TR_TAG_OPTIMIZER, 0);
    void *p = must_alloc(a, 10 * MiB, TR_TAG_ACTIVATIONS, 0);
    tr_alloc_free(a, p);
    tr_alloc_stats s = stats(a);
    CHECK(s.peak_allocated == 11 * MiB && s.tag_peak[TR_TAG_ACTIVATIONS] == 10 * MiB &&
          s.tag_allocated[TR_TAG_ACTIVATIONS] == 0 && s.pool_peak_allocated[1] == 10 * MiB,
          "peaks kept after free: %llu", (unsigned long long)s.peak_allocated);
    tr_alloc_reset_peak(a);
    s = stats(a);
    CHECK(s.peak_allocated == MiB && s.tag_peak[TR_TAG_ACTIVATIONS] == 0 && s.tag_peak[TR_TAG_OPTIMIZER] == MiB &&
          s.pool_peak_allocated[1] == 0 && s.peak_reserved == s.reserved && s.reserved == 12 * MiB,
          "peaks restart from current: %llu %llu", (unsigned long long)s.peak_allocated,
          (unsigned long long)s.peak_reserved);
    tr_alloc_empty_cache(a);
    CHECK(stats(a).peak_reserved == 12 * MiB, "peak_reserved stays after release");
    tr_alloc_free(a, k);
    tr_alloc_destroy(a);
}

/* ------------------------------------------------------------ report, snapshot */

static void test_report(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    void *p = must_alloc(a, 3 * MiB, TR_TAG_ACTIVATIONS, 0);
    char buf[8192];
    size_t n = tr_alloc_report(a, buf, sizeof buf);
    CHECK(n == strlen(buf) && n > 0 && n < sizeof buf, "length %zu vs %zu", n, strlen(buf));
    for (int t = 0; t < TR_NTAGS; t++) CHECK(strstr(buf, tr_tag_name(t)), "report lacks %s", tr_tag_name(t));
    const char *more[] = { "3.00 MiB", "20.00 MiB", "small", "large", "reserved", "allocated", "largest free block" };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) CHECK(strstr(buf, more[i]), "report lacks %s", more[i]);
    char small[16];
    size_t m = tr_alloc_report(a, small, sizeof small);
    CHECK(m == n && strlen(small) == sizeof small - 1 && strncmp(small, buf, 15) == 0, "truncation: %zu", m);
    CHECK(tr_alloc_report(a, NULL, 0) == n, "length-only call");
    tr_alloc_free(a, p);
    tr_alloc_destroy(a);
}

static char tmpdir[64];

static void test_snapshot(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    char *w = must_alloc(a, 1000, TR_TAG_WEIGHTS, 0);
    char *act = must_alloc(a, 5000, TR_TAG_ACTIVATIONS, 3);
    char *gone = must_alloc(a, 2 * MiB, TR_TAG_GRADS, 0);
    tr_alloc_free(a, gone);
    char path[128], tmp[140];
    snprintf(path, sizeof path, "%s/snap.json", tmpdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    tr_error e;
    tr_error_clear(&e);
    CHECK(tr_alloc_snapshot(a, path, &e) == TR_OK, "%s", e.msg);
    CHECK(access(tmp, F_OK) != 0, "temporary file renamed away");
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK(root, "snapshot is not valid JSON: %s", je.text);
    if (!root) goto out;
    CHECK(json_is_string(json_object_get(root, "device")) &&
          strcmp(json_string_value(json_object_get(root, "device")), "fake") == 0, "device");
    json_t *st = json_object_get(root, "stats");
    CHECK(json_integer_value(json_object_get(st, "allocated")) == 1024 + 5120, "stats.allocated");
    CHECK(json_integer_value(json_object_get(json_object_get(st, "by_tag"), "activations")) == 5120, "by_tag");
    json_t *segs = json_object_get(root, "segments");
    CHECK(json_array_size(segs) == 3, "three segments: %zu", json_array_size(segs));
    int found = 0, free_null = 0;
    size_t i, j;
    json_t *sg, *b;
    json_array_foreach(segs, i, sg) {
        uintptr_t base = (uintptr_t)json_integer_value(json_object_get(sg, "address"));
        json_array_foreach(json_object_get(sg, "blocks"), j, b) {
            json_t *tag = json_object_get(b, "tag");
            uintptr_t addr = base + (uintptr_t)json_integer_value(json_object_get(b, "offset"));
            if (addr == (uintptr_t)act) {
                found = json_is_true(json_object_get(b, "live")) && json_is_string(tag) &&
                        strcmp(json_string_value(tag), "activations") == 0 &&
                        json_integer_value(json_object_get(b, "size")) == 5120 &&
                        strcmp(json_string_value(json_object_get(sg, "pool")), "small") == 0 &&
                        json_integer_value(json_object_get(sg, "stream")) == 3;
            }
            if (json_is_false(json_object_get(b, "live")) && json_is_null(tag)) free_null++;
        }
    }
    CHECK(found, "the activations block with its fields");
    CHECK(free_null == 3, "free blocks have tag null: %d", free_null);
    json_t *ev = json_object_get(root, "events");
    json_t *last = json_array_get(ev, json_array_size(ev) - 1);
    CHECK(json_array_size(ev) == 7, "3 raw_alloc + 3 alloc + 1 free: %zu", json_array_size(ev));
    CHECK(last && strcmp(json_string_value(json_object_get(last, "kind")), "free") == 0 &&
          strcmp(json_string_value(json_object_get(last, "tag")), "grads") == 0, "last event is the free");
    json_decref(root);

    /* unwritable paths fail cleanly, naming the path */
    CHECK(tr_alloc_snapshot(a, "/nonexistent-dir/snap.json", &e) == TR_EUSER &&
          strstr(e.msg, "/nonexistent-dir/snap.json"), "missing folder: %s", e.msg);
    CHECK(tr_alloc_snapshot(a, tmpdir, &e) == TR_EUSER && strstr(e.msg, tmpdir), "a folder: %s", e.msg);
    char tmp2[140];
    snprintf(tmp2, sizeof tmp2, "%s.tmp", tmpdir);
    CHECK(access(tmp2, F_OK) != 0, "failed snapshot leaves no temporary file");
out:
    unlink(path);
    tr_alloc_free(a, w);
    tr_alloc_free(a, act);
    tr_alloc_destroy(a);
}

/* ------------------------------------------------------------ CPU backend, odd frees */

static void test_cpu_backend(void)
{
    tr_raw_backend cpu = tr_cpu_raw_backend();
    tr_alloc *a = tr_alloc_new(&cpu);
    CHECK(a, "new");
    if (!a) return;
    unsigned char *p[16];
    for (int i = 0; i < 16; i++) {
        size_t size = (size_t)(i + 1) * 97 * KiB + (size_t)i;
        p[i] = must_alloc(a, size, i % TR_NTAGS, 0);
        CHECK((uintptr_t)p[i] % 256 == 0, "aligned");
        memset(p[i], i, size); /* real memory: ASan checks the bounds */
    }
    for (int i = 0; i < 16; i += 2) tr_alloc_free(a, p[i]);
    for (int i = 1; i < 16; i += 2) CHECK(p[i][0] == i && p[i][(size_t)(i + 1) * 97 * KiB] == i, "contents kept");
    check_ok(a);
    tr_alloc_empty_cache(a);
    tr_alloc_destroy(a); /* the odd blocks are freed with their segments */

    /* large blocks live in one range: writable memory, kept across a trim and a regrow */
    a = tr_alloc_new(&cpu);
    CHECK(a, "new");
    if (!a) return;
    unsigned char *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = must_alloc(a, 24 * MiB, TR_TAG_ACTIVATIONS, 0);
        memset(r[i], i + 1, 24 * MiB);
    }
    CHECK(r[1] == r[0] + 24 * MiB && r[2] == r[1] + 24 * MiB, "adjacent in one range");
    CHECK((uintptr_t)r[0] % (2 * MiB) == 0, "the range starts on a 2 MiB boundary");
    tr_alloc_free(a, r[1]);
    unsigned char *q = must_alloc(a, 30 * MiB, TR_TAG_ACTIVATIONS, 0);   /* the 24 MiB hole is too small */
    CHECK(q == r[2] + 24 * MiB && stats(a).pool_reserved[1] == 102 * MiB, "grew past the live end: %llu",
          (unsigned long long)stats(a).pool_reserved[1]);
    memset(q, 9, 30 * MiB);
    CHECK(r[0][24 * MiB - 1] == 1 && r[2][0] == 3, "contents kept");
    tr_alloc_free(a, q);
    tr_alloc_free(a, r[2]);
    tr_alloc_empty_cache(a);
    CHECK(stats(a).pool_reserved[1] == 24 * MiB, "trimmed to the live block: %llu",
          (unsigned long long)stats(a).pool_reserved[1]);
    unsigned char *g = must_alloc(a, 40 * MiB, TR_TAG_ACTIVATIONS, 0);
    memset(g, 7, 40 * MiB);   /* pages given back and made usable again */
    CHECK(g == r[0] + 24 * MiB && g[40 * MiB - 1] == 7, "regrown where it was trimmed");
    check_ok(a);
    tr_alloc_free(a, r[0]);
    tr_alloc_free(a, g);
    tr_alloc_empty_cache(a);
    CHECK(stats(a).reserved == 0, "all returned");
    tr_alloc_destroy(a);
}

static void test_odd_frees(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    char *p = must_alloc(a, 4096, TR_TAG_WORKSPACE, 0);
    tr_alloc_free(a, NULL);
    tr_alloc_free(a, p + 512); /* not a block start */
    int x;
    tr_alloc_free(a, &x);      /* not ours */
    CHECK(stats(a).n_free == 0 && stats(a).allocated == 4096, "foreign pointers ignored");
    tr_alloc_free(a, p);
    tr_alloc_free(a, p);       /* double free ignored */
    CHECK(stats(a).n_free == 1 && stats(a).allocated == 0, "double free ignored");
    void *q = (void *)1;
    tr_error e;
    CHECK(tr_alloc_malloc(a, SIZE_MAX, TR_TAG_WORKSPACE, 0, &q, &e) == TR_EOOM && q == NULL &&
          strstr(e.msg, "out of memory"), "an impossible size is out of memory: %s", e.msg);
    check_ok_and_destroy(a);
}

/* ------------------------------------------------------------ randomized */

typedef struct live_blk {
    uintptr_t p;
    size_t size, requested;
    int tag;
} live_blk;

/* A size in [1, 64 MiB], log-skewed: most requests are small. */
static size_t random_size(uint64_t *rng)
{
    uint64_t r = check_xorshift(rng);
    if (r % 50 == 0) return 0;
    unsigned k1 = 1 + (unsigned)(check_xorshift(rng) % 27), k2 = 1 + (unsigned)(check_xorshift(rng) % 27);
    unsigned k = k1 < k2 ? k1 : k2; /* min of two: skewed to small */
    size_t lo = (size_t)1 << (k - 1);
    size_t s = lo + (size_t)(check_xorshift(rng) % lo);
    return s > 64 * MiB ? 64 * MiB : s;
}

/* Independent check through the snapshot: blocks tile segments, no adjacent free
 * blocks, and the live blocks are exactly the shadow's. */
static void check_snapshot(tr_alloc *a, const live_blk *live, int n_live)
{
    char path[128];
    snprintf(path, sizeof path, "%s/rand.json", tmpdir);
    tr_error e;
    CHECK(tr_alloc_snapshot(a, path, &e) == TR_OK, "%s", e.msg);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK(root, "bad JSON: %s", je.text);
    if (!root) return;
    size_t i, j;
    json_t *sg, *b;
    int seen = 0;
    json_array_foreach(json_object_get(root, "segments"), i, sg) {
        json_int_t at = 0, size = json_integer_value(json_object_get(sg, "size"));
        uintptr_t base = (uintptr_t)json_integer_value(json_object_get(sg, "address"));
        int prev_free = 0;
        json_array_foreach(json_object_get(sg, "blocks"), j, b) {
            int is_live = json_is_true(json_object_get(b, "live"));
            CHECK(json_integer_value(json_object_get(b, "offset")) == at, "blocks tile the segment");
            CHECK(is_live || !prev_free, "adjacent free blocks in segment %#lx", (unsigned long)base);
            if (is_live) {
                seen++;
                int k;
                for (k = 0; k < n_live && live[k].p != base + (uintptr_t)at; k++) {}
                CHECK(k < n_live && (json_int_t)live[k].size == json_integer_value(json_object_get(b, "size")),
                      "snapshot live block %#lx unknown to the shadow", (unsigned long)(base + at));
            }
            prev_free = !is_live;
            at += json_integer_value(json_object_get(b, "size"));
        }
        CHECK(at == size, "blocks cover the segment");
    }
    CHECK(seen == n_live, "snapshot has %d live blocks, shadow %d", seen, n_live);
    json_t *ev = json_object_get(root, "events"), *x;
    json_int_t prev_seq = -1;
    CHECK(json_array_size(ev) == 256, "the event ring holds the last 256 events: %zu", json_array_size(ev));
    json_array_foreach(ev, i, x) {
        json_int_t seq = json_integer_value(json_object_get(x, "seq"));
        CHECK(prev_seq < 0 || seq == prev_seq + 1, "events oldest first, consecutive: %lld after %lld",
              (long long)seq, (long long)prev_seq);
        prev_seq = seq;
    }
    json_decref(root);
    unlink(path);
}

static void random_run(uint64_t seed, int n_ops, uint64_t max_split)
{
    enum { CAP = 400 };
    static live_blk live[CAP];
    int n_live = 0;
    fake f;
    tr_alloc *a = fake_new(&f);
    f.fail_rate = 0.003; /* exercises release-and-retry and real-failure OOMs */
    f.rng = seed ^ 0xABCDEF;
    if (max_split) tr_alloc_set_max_split_size(a, max_split);
    uint64_t rng = seed;
    tr_alloc_stats prev = stats(a);
    uint64_t ooms = 0, retries_seen = 0;
    int failures_before = check_case_failed;
    for (int op = 0; op < n_ops && check_case_failed == failures_before; op++) {
        uint64_t r = check_xorshift(&rng) % 1000;
        int reset = 0;
        if (r < 5) {
            tr_alloc_empty_cache(a);
        } else if (r < 8) {
            tr_alloc_reset_peak(a);
            reset = 1;
        } else if (r < 10) { /* switch a limit on or off */
            tr_alloc_set_limit(a, stats(a).limit ? 0 : (256 + check_xorshift(&rng) % 512) * MiB);
        } else if (n_live == CAP || (n_live > 0 && r < 470)) {
            int k = (int)(check_xorshift(&rng) % (uint64_t)n_live);
            tr_alloc_free(a, (void *)live[k].p);
            CHECK(tr_alloc_block_size(a, (void *)live[k].p) == 0, "freed block still live");
            live[k] = live[--n_live];
        } else {
            size_t size = random_size(&rng);
            int tag = (int)(check_xorshift(&rng) % TR_NTAGS);
            uintptr_t stream = check_xorshift(&rng) % 2 ? 0x7f00 : 0;
            void *p = NULL;
            tr_error e;
            tr_error_clear(&e);
            int rc = tr_alloc_malloc(a, size, tag, stream, &p, &e);
            if (rc == TR_EOOM) {
                ooms++;
                CHECK(p == NULL && strstr(e.msg, "out of memory") && strstr(e.msg, "largest free block"),
                      "OOM message: %s", e.msg);
                tr_alloc_stats s = stats(a);
                CHECK(s.n_ooms == prev.n_ooms + 1 && s.allocated == prev.allocated, "OOM changes no live block");
            } else {
                CHECK(rc == TR_OK && p, "alloc %zu: rc %d %s", size, rc, e.msg);
                if (!p) break;
                size_t bs = tr_alloc_block_size(a, p);
                size_t want = size < 512 ? 512 : (size + 511) / 512 * 512;
                CHECK(bs >= want && bs % 512 == 0, "block %zu for request %zu", bs, size);
                CHECK((uintptr_t)p % 256 == 0, "alignment");
                CHECK(fake_holds(&f, (uintptr_t)p, bs), "block outside every segment");
                for (int k = 0; k < n_live; k++)
                    CHECK((uintptr_t)p + bs <= live[k].p || live[k].p + live[k].size <= (uintptr_t)p,
                          "new block %p+%zu overlaps live %#lx+%zu", p, bs, (unsigned long)live[k].p, live[k].size);
                live[n_live++] = (live_blk){ (uintptr_t)p, bs, size, tag };
            }
        }
        /* the allocator's own invariants */
        tr_error e;
        tr_error_clear(&e);
        CHECK(tr_alloc_check(a, &e) == TR_OK, "op %d: %s", op, e.msg);
        /* the shadow model */
        tr_alloc_stats s = stats(a);
        uint64_t sum = 0, req = 0, tag_sum[TR_NTAGS] = { 0 };
        for (int k = 0; k < n_live; k++) {
            sum += live[k].size;
            req += live[k].requested;
            tag_sum[live[k].tag] += live[k].size;
        }
        CHECK(s.allocated == sum && s.requested == req && s.n_live_blocks == (uint64_t)n_live,
              "op %d: allocated %llu shadow %llu", op, (unsigned long long)s.allocated, (unsigned long long)sum);
        for (int t = 0; t < TR_NTAGS; t++)
            CHECK(s.tag_allocated[t] == tag_sum[t] && s.tag_peak[t] >= tag_sum[t], "op %d tag %d", op, t);
        CHECK(s.reserved == f.live_bytes && s.n_segments == (uint64_t)f.n_live, "op %d: reserved %llu backend %llu",
              op, (unsigned long long)s.reserved, (unsigned long long)f.live_bytes);
        CHECK(s.pool_reserved[0] + s.pool_reserved[1] == s.reserved &&
              s.pool_allocated[0] + s.pool_allocated[1] == s.allocated, "pools add up");
        CHECK(s.peak_allocated >= s.allocated && s.peak_reserved >= s.reserved, "peaks cover current");
        if (!reset) {
            int fell = s.peak_allocated < prev.peak_allocated || s.peak_reserved < prev.peak_reserved;
            for (int t = 0; t < TR_NTAGS; t++) fell |= s.tag_peak[t] < prev.tag_peak[t];
            for (int p = 0; p < 2; p++)
                fell |= s.pool_peak_allocated[p] < prev.pool_peak_allocated[p] ||
                        s.pool_peak_reserved[p] < prev.pool_peak_reserved[p];
            CHECK(!fell, "op %d: a peak fell without reset_peak", op);
        }
        CHECK(s.n_alloc >= prev.n_alloc && s.n_free >= prev.n_free, "counts never fall");
        if (s.n_retries > prev.n_retries) retries_seen++;
        prev = s;
        if (op % 10000 == 9999) check_snapshot(a, live, n_live);
    }
    CHECK(ooms > 0 && retries_seen > ooms, "the run exercised OOM (%llu) and successful retries (%llu)",
          (unsigned long long)ooms, (unsigned long long)retries_seen);
    CHECK(f.bad_frees == 0, "backend saw %llu frees of unknown or mis-sized segments", (unsigned long long)f.bad_frees);
    for (int k = 0; k < n_live; k++) tr_alloc_free(a, (void *)live[k].p);
    tr_alloc_empty_cache(a);
    CHECK(stats(a).reserved == 0 && f.n_live == 0, "everything returned at the end");
    tr_alloc_destroy(a);
}

/* ------------------------------------------------------------ caching off */

/* Every request is its own segment of the exact size at the backend, returned at its free;
 * the ledger keeps the rounded sizes; switching caching back on restores the policy. */
static void test_no_caching(void)
{
    fake f;
    tr_alloc *a = fake_new(&f);
    tr_alloc_set_caching(a, 0);
    void *p = must_alloc(a, 1000, TR_TAG_WEIGHTS, 0);
    void *q = must_alloc(a, 3, TR_TAG_ACTIVATIONS, 0);
    CHECK(f.n_alloc == 2 && f.n_live == 2, "two requests, two raw allocations: %llu, %d live",
          (unsigned long long)f.n_alloc, f.n_live);
    CHECK(f.live_bytes == 1003, "the backend holds exactly the requested bytes: %llu",
          (unsigned long long)f.live_bytes);
    CHECK(fake_holds(&f, (uintptr_t)p, 1000) && !fake_holds(&f, (uintptr_t)p, 1001),
          "the raw allocation ends where the request does");
    tr_alloc_stats s = stats(a);
    CHECK(s.allocated == 1024 + 512 && s.reserved == 1024 + 512, "ledger in rounded sizes: %llu allocated, %llu reserved",
          (unsigned long long)s.allocated, (unsigned long long)s.reserved);
    check_ok(a);
    tr_alloc_free(a, p);
    CHECK(f.n_free == 1 && f.n_live == 1, "a free returns its segment at once: %llu frees", (unsigned long long)f.n_free);
    void *r = must_alloc(a, 1000, TR_TAG_WEIGHTS, 0);
    CHECK(f.n_alloc == 3, "no cached block serves the next request: %llu raw allocations", (unsigned long long)f.n_alloc);
    tr_alloc_free(a, q);
    tr_alloc_free(a, r);
    CHECK(f.n_live == 0 && f.bad_frees == 0 && stats(a).reserved == 0, "all returned, each with its raw size: %d live, %llu bad",
          f.n_live, (unsigned long long)f.bad_frees);
    tr_alloc_set_caching(a, 1);
    void *c1 = must_alloc(a, 1000, TR_TAG_WEIGHTS, 0), *c2 = must_alloc(a, 1000, TR_TAG_WEIGHTS, 0);
    CHECK(f.n_alloc == 4, "caching on again: two requests share one 2 MiB segment (%llu raw)", (unsigned long long)f.n_alloc);
    tr_alloc_free(a, c1);
    tr_alloc_free(a, c2);
    check_ok_and_destroy(a);
    CHECK(f.n_live == 0 && f.bad_frees == 0, "destroy returned everything");
}

static void test_randomized(void) { random_run(0x9E3779B97F4A7C15ull, 100000, 0); }
static void test_randomized_max_split(void) { random_run(12345, 30000, 24 * MiB); }

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_alloc_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("FAIL setup: cannot create a temporary folder under /tmp\n");
        return 1;
    }
    RUN(test_rounding_and_pools);
    RUN(test_split_coalesce);
    RUN(test_max_split);
    RUN(test_streams);
    RUN(test_limit_oom);
    RUN(test_retry);
    RUN(test_empty_cache);
    RUN(test_reset_peak);
    RUN(test_report);
    RUN(test_snapshot);
    RUN(test_cpu_backend);
    RUN(test_odd_frees);
    RUN(test_no_caching);
    RUN(test_randomized);
    RUN(test_randomized_max_split);
    rmdir(tmpdir);
    return check_done();
}
