/* vocab.c — the tokenizer's containers: growable byte/id/span buffers, UTF-8
 * decoding, the token string <-> id table (open addressing, FNV-1a), and tokenizer.json's
 * model.vocab object read into it.
 *
 * Invariant: vocab.slot holds each id at most once; ids with a NULL string (holes) are
 * never indexed. */
#include "tokenizer_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ buffers */
bool tr_tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool tr_tok_buf_put(tok_buf *b, const char *s, size_t n)
{
    if (!tr_tok_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

bool tr_tok_buf_put_cp(tok_buf *b, int32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return tr_tok_buf_put(b, u, n);
}

void tr_tok_buf_free(tok_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void *tr_tok_grow(void *p, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return p;
    size_t c = *cap ? *cap * 2 : 32;
    void *q = realloc(p, c * elem);
    if (q) *cap = c;
    return q;
}

bool tr_tok_ids_push(tok_ids *v, int32_t id)
{
    int32_t *p = tr_tok_grow(v->p, &v->cap, v->n, sizeof *p);
    if (!p) return false;
    v->p = p;
    v->p[v->n++] = id;
    return true;
}

void tr_tok_ids_free(tok_ids *v)
{
    free(v->p);
    memset(v, 0, sizeof *v);
}

bool tr_tok_spans_push(tok_spans *v, size_t off, size_t len)
{
    tok_span *p = tr_tok_grow(v->p, &v->cap, v->n, sizeof *p);
    if (!p) return false;
    v->p = p;
    v->p[v->n].off = off;
    v->p[v->n].len = len;
    v->n++;
    return true;
}

/* ------------------------------------------------------------ UTF-8 */
int tr_tok_utf8_next(const char *s, size_t n, int32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return -1;
    if (u[0] < 0x80) { *cp = u[0]; return 1; }
    int len;
    int32_t c, min;
    if ((u[0] & 0xE0) == 0xC0) { len = 2; c = u[0] & 0x1F; min = 0x80; }
    else if ((u[0] & 0xF0) == 0xE0) { len = 3; c = u[0] & 0x0F; min = 0x800; }
    else if ((u[0] & 0xF8) == 0xF0) { len = 4; c = u[0] & 0x07; min = 0x10000; }
    else return -1;
    if ((size_t)len > n) return -1;
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) return -1;
        c = (c << 6) | (u[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    *cp = c;
    return len;
}

/* ------------------------------------------------------------ vocabulary */
uint64_t tr_tok_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

bool tr_tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n)
{
    if (id >= v->n) {
        int32_t nn = id + 1;
        char **str = realloc(v->str, (size_t)nn * sizeof *str);
        if (!str) return false;
        v->str = str;
        uint32_t *len = realloc(v->len, (size_t)nn * sizeof *len);
        if (!len) return false;
        v->len = len;
        if (v->score) {
            float *sc = realloc(v->score, (size_t)nn * sizeof *sc);
            if (!sc) return false;
            v->score = sc;
            for (int32_t i = v->n; i < nn; i++) sc[i] = 0.0f;
        }
        for (int32_t i = v->n; i < nn; i++) { str[i] = NULL; len[i] = 0; }
        v->n = nn;
    }
    char *copy = malloc(n + 1);
    if (!copy) return false;
    memcpy(copy, s, n);
    copy[n] = '\0';
    free(v->str[id]);
    v->str[id] = copy;
    v->len[id] = (uint32_t)n;
    if (n > v->max_len) v->max_len = (uint32_t)n;
    return true;
}

bool tr_tok_vocab_index(tok_vocab *v)
{
    size_t cap = 16;
    while (cap < (size_t)v->n * 2) cap *= 2;
    int32_t *slot = malloc(cap * sizeof *slot);
    if (!slot) return false;
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    for (int32_t id = 0; id < v->n; id++) {
        if (!v->str[id]) continue;
        size_t i = tr_tok_hash_bytes(v->str[id], v->len[id]) & (cap - 1);
        bool dup = false;
        while (slot[i] >= 0) {
            int32_t o = slot[i];
            if (v->len[o] == v->len[id] && memcmp(v->str[o], v->str[id], v->len[id]) == 0) {
                dup = true;
                break;
            }
            i = (i + 1) & (cap - 1);
        }
        if (!dup) slot[i] = id;
    }
    free(v->slot);
    v->slot = slot;
    v->cap = cap;
    return true;
}

int32_t tr_tok_vocab_find(const tok_vocab *v, const char *s, size_t n)
{
    if (!v->slot || n > v->max_len) return -1;
    size_t i = tr_tok_hash_bytes(s, n) & (v->cap - 1);
    while (v->slot[i] >= 0) {
        int32_t id = v->slot[i];
        if (v->len[id] == n && memcmp(v->str[id], s, n) == 0) return id;
        i = (i + 1) & (v->cap - 1);
    }
    return -1;
}

void tr_tok_vocab_free(tok_vocab *v)
{
    for (int32_t i = 0; i < v->n; i++) free(v->str[i]);
    free(v->str);
    free(v->len);
    free(v->score);
    free(v->slot);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------ model.vocab of tokenizer.json
 * Here, below load.c and bpe_load.c, which both read one (WordPiece, BPE). */
int tr_tok_load_vocab_object(tr_tokenizer *tok, json_t *vocab, const char *path, int32_t *n, tr_error *err)
{
    if (!json_is_object(vocab)) return tr_fail(err, TR_EUSER, "tokenizer: %s: the model has no \"vocab\" object {token: id}", path);
    const char *key;
    json_t *val;
    *n = (int32_t)json_object_size(vocab);
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id >= *n)
            return tr_fail(err, TR_EUSER, "tokenizer: %s: model.vocab[\"%s\"] is not an id in 0..%d", path, key, *n - 1);
        if (!tr_tok_vocab_set(&tok->vocab, (int32_t)id, key, strlen(key))) return tr_fail(err, TR_EOOM, "tokenizer: out of host memory while loading");
    }
    /* two tokens of one id leave another id unset, and the table shorter than n */
    for (int32_t i = 0; i < *n; i++)
        if (i >= tok->vocab.n || !tok->vocab.str[i]) return tr_fail(err, TR_EUSER, "tokenizer: %s: model.vocab has no token with id %d (ids must be 0..%d)", path, i, *n - 1);
    return TR_OK;
}
