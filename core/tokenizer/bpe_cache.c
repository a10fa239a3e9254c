/* bpe_cache.c — the BPE word cache: a pre-tokenized word's ids, kept so that a word met
 * again skips the merge loop (`tokenizers` keeps such a cache too; it never changes ids).
 *
 * One cache belongs to one tokenizer and is shared by every thread encoding with it: 64
 * shards, each a direct-mapped table of 256 slots behind its own busy flag, taken with
 * try-lock semantics: a thread that finds the shard busy does not wait, it treats a lookup
 * as a miss and skips a store (the cache only ever saves time, so nothing blocks and no
 * system call is made). A new word takes its slot from whatever word held it, so memory
 * stays bounded: 16384 words of at most TOK_BPE_CACHE_WORD bytes.
 *
 * Invariant: a slot's entry is read and replaced only by the thread holding its shard's
 * flag (acquire on taking it, release on clearing it). */
#include "tokenizer_impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { SHARD_BITS = 6, SLOT_BITS = 8 };

typedef struct entry {
    uint64_t hash;
    uint32_t len, nids;
    int32_t ids[];        /* nids ids, then the word's len bytes */
} entry;

typedef struct shard {
    atomic_flag busy;
    entry *slot[1 << SLOT_BITS];
} shard;

struct tok_bpe_cache {
    shard shard[1 << SHARD_BITS];
};

tok_bpe_cache *tr_tok_bpe_cache_new(void)
{
    tok_bpe_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    for (int s = 0; s < (1 << SHARD_BITS); s++) atomic_flag_clear(&c->shard[s].busy);
    return c;
}

void tr_tok_bpe_cache_free(tok_bpe_cache *c)
{
    if (!c) return;
    for (int s = 0; s < (1 << SHARD_BITS); s++)
        for (int i = 0; i < (1 << SLOT_BITS); i++) free(c->shard[s].slot[i]);
    free(c);
}

static shard *shard_of(tok_bpe_cache *c, uint64_t h) { return &c->shard[h & ((1u << SHARD_BITS) - 1)]; }
static size_t slot_of(uint64_t h) { return (size_t)(h >> SHARD_BITS) & ((1u << SLOT_BITS) - 1); }

/* true when this thread now holds the shard; false when another one does. */
static bool take(shard *s) { return !atomic_flag_test_and_set_explicit(&s->busy, memory_order_acquire); }
static void give(shard *s) { atomic_flag_clear_explicit(&s->busy, memory_order_release); }

static bool same_word(const entry *e, uint64_t h, const char *w, size_t n)
{
    return e && e->hash == h && e->len == n && memcmp((const char *)(e->ids + e->nids), w, n) == 0;
}

int tr_tok_bpe_cache_get(tok_bpe_cache *c, const char *w, size_t n, tok_ids *out)
{
    if (n > TOK_BPE_CACHE_WORD) return 0;
    uint64_t h = tr_tok_hash_bytes(w, n);
    shard *s = shard_of(c, h);
    if (!take(s)) return 0;
    const entry *e = s->slot[slot_of(h)];
    int found = same_word(e, h, w, n);
    size_t mark = out->n;
    for (uint32_t i = 0; found > 0 && i < e->nids; i++)
        if (!tr_tok_ids_push(out, e->ids[i])) {
            out->n = mark;
            found = -1;
        }
    give(s);
    return found;
}

void tr_tok_bpe_cache_put(tok_bpe_cache *c, const char *w, size_t n, const int32_t *ids, size_t nids)
{
    if (n > TOK_BPE_CACHE_WORD) return;
    entry *e = malloc(sizeof *e + nids * sizeof(int32_t) + n);
    if (!e) return;
    uint64_t h = tr_tok_hash_bytes(w, n);
    e->hash = h;
    e->len = (uint32_t)n;
    e->nids = (uint32_t)nids;
    memcpy(e->ids, ids, nids * sizeof(int32_t));
    memcpy((char *)(e->ids + nids), w, n);
    shard *s = shard_of(c, h);
    if (!take(s)) {
        free(e);
        return;
    }
    entry *old = s->slot[slot_of(h)];
    s->slot[slot_of(h)] = e;
    give(s);
    free(old);
}
