/* pretok.c — splitting text before the model sees it: added tokens
 * (leftmost-longest, with lstrip/rstrip) and the pre-tokenizers BertPreTokenizer
 * (whitespace removed, each punctuation char its own word), WhitespaceSplit,
 * Metaspace (spaces -> U+2581, optional prepend, split keeping the marker at the start
 * of each word), ByteLevel and GPT-2's Split (byte_level.c), and a Sequence of them, each
 * step splitting every word of the one before, all with Hugging Face `tokenizers` semantics.
 *
 * Invariant: spans always lie inside the buffer they index and never are empty. */
#include "tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------------ added tokens */
static bool pieces_push(tok_pieces *v, size_t off, size_t len, int32_t id)
{
    if (id < 0 && len == 0) return true;
    tok_piece *p = tr_tok_grow(v->p, &v->cap, v->n, sizeof *p);
    if (!p) return false;
    v->p = p;
    v->p[v->n].off = off;
    v->p[v->n].len = len;
    v->p[v->n].added_id = id;
    v->n++;
    return true;
}

/* Length of the whitespace run ending at s[e] (exclusive), stopping at b. */
static size_t ws_before(const char *s, size_t b, size_t e)
{
    size_t p = e;
    while (p > b) {
        size_t q = p - 1;
        while (q > b && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
        int32_t c;
        if (tr_tok_utf8_next(s + q, p - q, &c) < 0 || !tr_tok_is_whitespace(c)) break;
        p = q;
    }
    return e - p;
}

static size_t ws_after(const char *s, size_t b, size_t n)
{
    size_t p = b;
    while (p < n) {
        int32_t c;
        int k = tr_tok_utf8_next(s + p, n - p, &c);
        if (k < 0 || !tr_tok_is_whitespace(c)) break;
        p += (size_t)k;
    }
    return p - b;
}

bool tr_tok_split_added(const tok_added *added, int nadded, bool normalized, const char *s,
                     size_t n, tok_pieces *out)
{
    out->n = 0;
    /* the bytes an added token can start with: most positions are rejected by one look */
    bool lead[256] = { false };
    for (int k = 0; k < nadded; k++)
        if (added[k].normalized == normalized && added[k].len > 0) lead[(unsigned char)added[k].content[0]] = true;
    size_t text_start = 0, i = 0;
    while (i < n) {
        if (!lead[(unsigned char)s[i]]) {
            i++;
            continue;
        }
        int best = -1;
        for (int k = 0; k < nadded; k++) {
            const tok_added *a = &added[k];
            if (a->normalized != normalized || a->len == 0 || a->len > n - i) continue;
            if (memcmp(s + i, a->content, a->len) != 0) continue;
            if (best < 0 || a->len > added[best].len) best = k;
        }
        if (best < 0) {
            i++;
            continue;
        }
        const tok_added *a = &added[best];
        size_t b = i, e = i + a->len;
        if (a->lstrip) b -= ws_before(s, text_start, b);
        if (a->rstrip) e += ws_after(s, e, n);
        if (!pieces_push(out, text_start, b - text_start, -1)) return false;
        if (!pieces_push(out, b, e - b, a->id)) return false;
        text_start = i = e;
    }
    return pieces_push(out, text_start, n - text_start, -1);
}

/* ------------------------------------------------------------ BertPreTokenizer */
/* Rust's is_ascii_punctuation or the Unicode punctuation categories P*. */
static bool bert_is_punct(int32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
        return true;
    int o = tr_tok_hf_punct(c);
    if (o >= 0) return o;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

/* Appends the words of s[0..n) (copied into dst->text) to dst. */
static bool split_bert(const char *src, size_t n, bool punct, tok_words *dst)
{
    size_t base = dst->text.n;
    if (!tr_tok_buf_put(&dst->text, src, n)) return false;
    const char *s = dst->text.p + base;
    tok_spans *words = &dst->spans;
    size_t i = 0, start = 0;
    bool in_word = false;
    while (i < n) {
        int32_t c;
        int k = tr_tok_utf8_next(s + i, n - i, &c);
        if (k < 0) return false;
        bool ws = tr_tok_is_whitespace(c), p = punct && bert_is_punct(c);
        if (ws || p) {
            if (in_word && !tr_tok_spans_push(words, base + start, i - start)) return false;
            in_word = false;
            if (p && !tr_tok_spans_push(words, base + i, (size_t)k)) return false;
        } else if (!in_word) {
            in_word = true;
            start = i;
        }
        i += (size_t)k;
    }
    return !in_word || tr_tok_spans_push(words, base + start, n - start);
}

/* ------------------------------------------------------------ Metaspace */
static bool metaspace(const tok_pretok *pt, const char *s, size_t n, bool first, tok_words *dst)
{
    size_t rl = strlen(pt->replacement);
    tok_buf *work = &dst->text;
    tok_spans *words = &dst->spans;
    size_t base = work->n;
    if (n == 0) return true;
    bool starts = n >= rl && memcmp(s, pt->replacement, rl) == 0;
    /* prepend when the text does not start with the marker (a leading space counts: it
     * becomes the marker below) */
    if (s[0] == ' ') starts = true;
    bool prepend = !starts && (pt->prepend == TOK_PREPEND_ALWAYS ||
                               (pt->prepend == TOK_PREPEND_FIRST && first));
    if (prepend && !tr_tok_buf_put(work, pt->replacement, rl)) return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            if (!tr_tok_buf_put(work, pt->replacement, rl)) return false;
        } else if (!tr_tok_buf_put(work, s + i, 1)) {
            return false;
        }
    }
    if (!pt->split) return tr_tok_spans_push(words, base, work->n - base);
    size_t start = base;
    for (size_t i = base; i + rl <= work->n; i++) {
        if (i > start && memcmp(work->p + i, pt->replacement, rl) == 0) {
            if (!tr_tok_spans_push(words, start, i - start)) return false;
            start = i;
        }
    }
    return start >= work->n || tr_tok_spans_push(words, start, work->n - start);
}

/* ------------------------------------------------------------ the chain */
/* Appends the words one step makes of s[0..n) to dst. */
static bool pretok_step(const tok_pretok *pt, const char *s, size_t n, bool first, tok_buf *raw,
                        tok_words *dst)
{
    switch (pt->kind) {
    case TOK_PRE_METASPACE: return metaspace(pt, s, n, first, dst);
    case TOK_PRE_BYTE_LEVEL: return tr_tok_byte_level(pt, s, n, raw, dst);
    case TOK_PRE_GPT2_SPLIT: return tr_tok_gpt2_split(s, n, dst);
    default: return split_bert(s, n, pt->kind == TOK_PRE_BERT, dst);
    }
}

static void words_clear(tok_words *w)
{
    w->text.n = 0;
    w->spans.n = 0;
}

bool tr_tok_pretokenize(const tok_pretok *steps, int nsteps, const char *s, size_t n, bool first,
                        tok_pre_scratch *sc, const tok_words **out)
{
    tok_words *dst = &sc->pass[0];
    words_clear(dst);
    *out = dst;
    if (nsteps == 0)
        return n == 0 || (tr_tok_buf_put(&dst->text, s, n) && tr_tok_spans_push(&dst->spans, 0, n));
    if (!pretok_step(&steps[0], s, n, first, &sc->raw, dst)) return false;
    for (int k = 1; k < nsteps; k++) {
        const tok_words *src = &sc->pass[(k - 1) & 1];
        dst = &sc->pass[k & 1];
        words_clear(dst);
        for (size_t w = 0; w < src->spans.n; w++) {
            tok_span sp = src->spans.p[w];
            if (!pretok_step(&steps[k], src->text.p + sp.off, sp.len, first && sp.off == 0, &sc->raw, dst))
                return false;
        }
        *out = dst;
    }
    return true;
}

void tr_tok_pre_scratch_free(tok_pre_scratch *sc)
{
    for (int i = 0; i < 2; i++) {
        tr_tok_buf_free(&sc->pass[i].text);
        free(sc->pass[i].spans.p);
    }
    tr_tok_buf_free(&sc->raw);
    memset(sc, 0, sizeof *sc);
}
