/* bpe.c — the BPE model as Hugging Face `tokenizers` runs it on one pre-tokenized word:
 * every char becomes its vocabulary id (the continuing-subword prefix before every char but
 * the first, the end-of-word suffix after the last), an unknown char its <0xXX> byte tokens
 * (byte_fallback) or the unk id (consecutive ones fused with fuse_unk) or nothing (no
 * unk_token); then the lowest-ranked adjacent pair is merged, leftmost first, until no
 * pair has a merge.
 *
 * The merge loop is `tokenizers`' own (word.rs merge_all): a min-heap of candidate merges
 * keyed by (rank, position), an entry dropped when its pair no longer merges into the id it
 * was queued with. Pairs are found in an open-addressing map from (left id, right id) to
 * (rank, merged id); single chars below U+0180 (every byte-level char) through a table.
 * Words of up to TOK_BPE_CACHE_WORD bytes go through the shared cache (bpe_cache.c).
 *
 * Invariant: after tr_tok_bpe_finish the tables are only read. */
#include "tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FAST_CHARS = 0x180 };   /* byte-level chars are U+0021..U+0143 */

struct tok_bpe {
    uint64_t *key;        /* left << 32 | right; EMPTY when free */
    int32_t *rank, *merged;
    size_t cap;
    int32_t char_id[FAST_CHARS];   /* id of the one-char token; -1 when absent or unused */
    bool char_fast;                /* no prefix or suffix ever joins a char */
    int32_t byte_id[256];          /* id of "<0xXX>", -1 when absent */
    tok_bpe_cache *cache;
};

static const uint64_t EMPTY = ~(uint64_t)0;

static size_t pair_slot(uint64_t key, size_t cap)
{
    key ^= key >> 33;   /* the murmur3 finaliser: ids are small and dense */
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static uint64_t pair_key(int32_t left, int32_t right)
{
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

/* ------------------------------------------------------------ building */
tok_bpe *tr_tok_bpe_new(size_t nmerges)
{
    tok_bpe *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->cap = 16;
    while (b->cap < nmerges * 2) b->cap *= 2;
    b->key = malloc(b->cap * sizeof *b->key);
    b->rank = malloc(b->cap * sizeof *b->rank);
    b->merged = malloc(b->cap * sizeof *b->merged);
    b->cache = tr_tok_bpe_cache_new();
    if (!b->key || !b->rank || !b->merged || !b->cache) {
        tr_tok_bpe_free(b);
        return NULL;
    }
    for (size_t i = 0; i < b->cap; i++) b->key[i] = EMPTY;
    return b;
}

/* The map never fills: tr_tok_bpe_new sized it for every merge at half load. */
bool tr_tok_bpe_add_merge(tok_bpe *b, int32_t left, int32_t right, int32_t rank, int32_t merged)
{
    uint64_t k = pair_key(left, right);
    size_t i = pair_slot(k, b->cap);
    for (size_t probes = 0; b->key[i] != EMPTY && b->key[i] != k; probes++) {
        if (probes == b->cap) return false;
        i = (i + 1) & (b->cap - 1);
    }
    b->key[i] = k;
    b->rank[i] = rank;
    b->merged[i] = merged;
    return true;
}

static bool find_merge(const tok_bpe *b, int32_t left, int32_t right, int32_t *rank, int32_t *merged)
{
    uint64_t k = pair_key(left, right);
    for (size_t i = pair_slot(k, b->cap);; i = (i + 1) & (b->cap - 1)) {
        if (b->key[i] == EMPTY) return false;
        if (b->key[i] == k) {
            *rank = b->rank[i];
            *merged = b->merged[i];
            return true;
        }
    }
}

int32_t tr_tok_model_id(const tok_model *m, const tok_vocab *v, const char *s, size_t n)
{
    int32_t id = tr_tok_vocab_find(v, s, n);
    return id < m->nvocab ? id : -1;
}

bool tr_tok_bpe_finish(tok_bpe *b, const tok_model *m, const tok_vocab *v)
{
    b->char_fast = m->prefix[0] == '\0' && m->suffix[0] == '\0';
    tok_buf u = { 0 };
    for (int32_t c = 0; c < FAST_CHARS; c++) {
        u.n = 0;
        if (!tr_tok_buf_put_cp(&u, c)) { tr_tok_buf_free(&u); return false; }
        b->char_id[c] = tr_tok_model_id(m, v, u.p, u.n);
    }
    tr_tok_buf_free(&u);
    for (int i = 0; i < 256; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned)i);
        b->byte_id[i] = tr_tok_model_id(m, v, name, strlen(name));
    }
    return true;
}

void tr_tok_bpe_free(tok_bpe *b)
{
    if (!b) return;
    free(b->key);
    free(b->rank);
    free(b->merged);
    tr_tok_bpe_cache_free(b->cache);
    free(b);
}

void tr_tok_bpe_work_free(tok_bpe_work *w)
{
    free(w->sym);
    free(w->heap);
    tr_tok_buf_free(&w->piece);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------ symbols */
static bool sym_add(tok_bpe_work *w, int32_t id, int32_t len)
{
    tok_bpe_sym *p = tr_tok_grow(w->sym, &w->capsym, w->nsym, sizeof *p);
    if (!p) return false;
    w->sym = p;
    int32_t k = (int32_t)w->nsym;
    if (k > 0) w->sym[k - 1].next = k;
    w->sym[k] = (tok_bpe_sym){ id, k - 1, -1, len };
    w->nsym++;
    return true;
}

/* The id of one char of the word (with the prefix when not first, the suffix when last),
 * or -1; *s, *n are set to the string looked up (byte fallback spells its bytes). */
static int32_t char_token(const tok_model *m, const tok_vocab *v, tok_bpe_work *w, const char *c,
                          size_t len, int32_t cp, bool first, bool last, const char **s, size_t *n)
{
    const tok_bpe *b = m->bpe;
    *s = c;
    *n = len;
    if (b->char_fast) return cp >= 0 && cp < FAST_CHARS ? b->char_id[cp] : tr_tok_model_id(m, v, c, len);
    const char *pre = first ? "" : m->prefix, *suf = last ? m->suffix : "";
    if (!*pre && !*suf) return cp >= 0 && cp < FAST_CHARS ? b->char_id[cp] : tr_tok_model_id(m, v, c, len);
    w->piece.n = 0;
    if (!tr_tok_buf_put(&w->piece, pre, strlen(pre)) || !tr_tok_buf_put(&w->piece, c, len) ||
        !tr_tok_buf_put(&w->piece, suf, strlen(suf)))
        return -2;
    *s = w->piece.p;
    *n = w->piece.n;
    return tr_tok_model_id(m, v, w->piece.p, w->piece.n);
}

/* The word's initial symbols, as merge_word in `tokenizers`' bpe/model.rs makes them. */
static bool initial_symbols(const tok_model *m, const tok_vocab *v, const char *word, size_t n,
                            tok_bpe_work *w)
{
    const tok_bpe *b = m->bpe;
    w->nsym = 0;
    int32_t unk_len = 0;   /* > 0: an unk waits to be added (it may still fuse) */
    for (size_t i = 0; i < n;) {
        int32_t cp;
        int k = tr_tok_utf8_next(word + i, n - i, &cp);
        if (k < 0) { k = 1; cp = -1; }
        const char *s;
        size_t slen;
        int32_t id = char_token(m, v, w, word + i, (size_t)k, cp, i == 0, i + (size_t)k >= n, &s, &slen);
        if (id == -2) return false;
        i += (size_t)k;
        if (id >= 0) {
            if (unk_len && !sym_add(w, m->unk_id, unk_len)) return false;
            unk_len = 0;
            if (!sym_add(w, id, k)) return false;
            continue;
        }
        if (m->byte_fallback) {
            bool all = true;
            for (size_t j = 0; j < slen && all; j++) all = b->byte_id[(unsigned char)s[j]] >= 0;
            if (all) {   /* a waiting unk stays waiting: `tokenizers` adds it after these */
                for (size_t j = 0; j < slen; j++)
                    if (!sym_add(w, b->byte_id[(unsigned char)s[j]], 1)) return false;
                continue;
            }
        }
        if (m->unk_id < 0) continue;   /* no unk_token: the char is dropped */
        if (unk_len && m->fuse_unk) {
            unk_len += k;
            continue;
        }
        if (unk_len && !sym_add(w, m->unk_id, unk_len)) return false;
        unk_len = k;
    }
    return !unk_len || sym_add(w, m->unk_id, unk_len);
}

/* ------------------------------------------------------------ the heap */
static bool cand_less(tok_bpe_cand a, tok_bpe_cand b)
{
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static bool heap_push(tok_bpe_work *w, tok_bpe_cand c)
{
    tok_bpe_cand *p = tr_tok_grow(w->heap, &w->capheap, w->nheap, sizeof *p);
    if (!p) return false;
    w->heap = p;
    size_t i = w->nheap++;
    while (i > 0 && cand_less(c, w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = c;
    return true;
}

static tok_bpe_cand heap_pop(tok_bpe_work *w)
{
    tok_bpe_cand top = w->heap[0], last = w->heap[--w->nheap];
    size_t i = 0, n = w->nheap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        tok_bpe_cand best = last;
        if (l < n && cand_less(w->heap[l], best)) { m = l; best = w->heap[l]; }
        if (r < n && cand_less(w->heap[r], best)) m = r;
        if (m == i) break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

/* Queues the merge of the pair starting at pos, when the pair has one. */
static bool queue_pair(const tok_bpe *b, tok_bpe_work *w, int32_t pos)
{
    int32_t next = w->sym[pos].next, rank, merged;
    if (next < 0 || !find_merge(b, w->sym[pos].id, w->sym[next].id, &rank, &merged)) return true;
    return heap_push(w, (tok_bpe_cand){ rank, pos, merged });
}

static bool merge_all(const tok_bpe *b, tok_bpe_work *w)
{
    w->nheap = 0;
    for (size_t i = 0; i + 1 < w->nsym; i++)
        if (!queue_pair(b, w, (int32_t)i)) return false;
    while (w->nheap > 0) {
        tok_bpe_cand top = heap_pop(w);
        tok_bpe_sym *s = &w->sym[top.pos];
        if (s->len == 0 || s->next < 0) continue;
        tok_bpe_sym *right = &w->sym[s->next];
        int32_t rank, merged;
        /* stale: the pair at pos changed since it was queued */
        if (!find_merge(b, s->id, right->id, &rank, &merged) || merged != top.id) continue;
        s->id = top.id;
        s->len += right->len;
        s->next = right->next;
        right->len = 0;
        if (s->next >= 0) w->sym[s->next].prev = top.pos;
        if (s->prev >= 0 && !queue_pair(b, w, s->prev)) return false;
        if (!queue_pair(b, w, top.pos)) return false;
    }
    return true;
}

/* ------------------------------------------------------------ one word */
bool tr_tok_bpe(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_bpe_work *work,
                tok_ids *out)
{
    if (n == 0) return true;
    if (m->ignore_merges) {
        int32_t id = tr_tok_model_id(m, v, w, n);
        if (id >= 0) return tr_tok_ids_push(out, id);
    }
    int hit = tr_tok_bpe_cache_get(m->bpe->cache, w, n, out);
    if (hit) return hit > 0;
    if (!initial_symbols(m, v, w, n, work) || !merge_all(m->bpe, work)) return false;
    size_t mark = out->n;
    for (size_t i = 0; i < work->nsym; i++)
        if (work->sym[i].len != 0 && !tr_tok_ids_push(out, work->sym[i].id)) return false;
    tr_tok_bpe_cache_put(m->bpe->cache, w, n, out->p + mark, out->n - mark);
    return true;
}
