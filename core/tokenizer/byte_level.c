/* byte_level.c — GPT-2's byte-level pre-tokenization as Hugging Face `tokenizers` runs it
 * (its ByteLevel pre-tokenizer, and a Split with GPT-2's pattern):
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * matched by hand with Oniguruma's leftmost-first alternation, then every byte of a piece
 * mapped to the printable char GPT-2's bytes_to_unicode gives it (space -> U+0120 'Ġ').
 * Every char is whitespace, a letter, a number or other, so the matches tile the text.
 * \s is Unicode's White_Space; letters and numbers come from utf8proc's general category,
 * corrected by tr_tok_hf_gpt2_class where Oniguruma's Unicode version differs.
 *
 * Invariant: every span appended is non-empty and indexes dst->text. */
#include "tokenizer_impl.h"

#include <utf8proc.h>

/* ------------------------------------------------------------ classes */
static int gpt2_class(int32_t c)
{
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return TOK_GPT2_LETTER;
        if (c >= '0' && c <= '9') return TOK_GPT2_NUMBER;
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return TOK_GPT2_SPACE;
        return TOK_GPT2_OTHER;
    }
    if (tr_tok_is_whitespace(c)) return TOK_GPT2_SPACE;
    int o = tr_tok_hf_gpt2_class(c);
    if (o >= 0) return o;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return TOK_GPT2_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return TOK_GPT2_NUMBER;
    default:
        return TOK_GPT2_OTHER;
    }
}

/* The code point at s[i] and its class; returns its byte length (a byte that does not
 * start valid UTF-8 counts as one "other" char: encoding has validated the text). */
static size_t char_at(const char *s, size_t n, size_t i, int *cls, int32_t *cp)
{
    int k = tr_tok_utf8_next(s + i, n - i, cp);
    if (k < 0) {
        *cp = (unsigned char)s[i];
        *cls = TOK_GPT2_OTHER;
        return 1;
    }
    *cls = gpt2_class(*cp);
    return (size_t)k;
}

/* ------------------------------------------------------------ the pattern */
/* The end of the match that starts at s[i] (i < n). */
static size_t piece_end(const char *s, size_t n, size_t i)
{
    int cls;
    int32_t c;
    size_t j = i + char_at(s, n, i, &cls, &c);
    /* 's 't 're 've 'm 'll 'd: ASCII, case-sensitive, even inside a longer word */
    if (c == '\'' && j < n) {
        char a = s[j], b = j + 1 < n ? s[j + 1] : '\0';
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return j + 1;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return j + 2;
    }
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': one space may lead a run of one class */
    size_t run = i;
    int want = cls;
    if (c == ' ' && j < n) {
        int next;
        int32_t d;
        char_at(s, n, j, &next, &d);
        if (next != TOK_GPT2_SPACE) {
            want = next;
            run = j;
        }
    }
    if (want != TOK_GPT2_SPACE) {
        size_t p = run;
        while (p < n) {
            int k;
            int32_t d;
            size_t len = char_at(s, n, p, &k, &d);
            if (k != want) break;
            p += len;
        }
        return p;
    }
    /* '\s+(?!\S)' then '\s+': a whitespace run followed by a non-space gives up its last
     * char (which then leads the next piece), unless the run is that one char */
    size_t p = i, last = i;
    while (p < n) {
        int k;
        int32_t d;
        size_t len = char_at(s, n, p, &k, &d);
        if (k != TOK_GPT2_SPACE) break;
        last = p;
        p += len;
    }
    if (p == n || last == i) return p;
    return last;
}

bool tr_tok_gpt2_split(const char *s, size_t n, tok_words *dst)
{
    for (size_t i = 0; i < n;) {
        size_t e = piece_end(s, n, i), off = dst->text.n;
        if (!tr_tok_buf_put(&dst->text, s + i, e - i) || !tr_tok_spans_push(&dst->spans, off, e - i))
            return false;
        i = e;
    }
    return true;
}

/* ------------------------------------------------------------ bytes -> chars */
/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves; the 68 others
 * (0-32, 127-160, 173), in order, become U+0100 onwards. */
static int32_t byte_char(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return (int32_t)b;
    if (b <= 32) return 256 + (int32_t)b;
    if (b <= 160) return 256 + 33 + (int32_t)(b - 127);
    return 256 + 33 + 34;   /* 173, the soft hyphen */
}

/* Appends the byte-level form of s[0..n) to b (every char below U+0180: 1 or 2 bytes). */
static bool put_bytes(tok_buf *b, const char *s, size_t n)
{
    if (!tr_tok_buf_reserve(b, 2 * n)) return false;
    char *o = b->p + b->n;
    for (size_t i = 0; i < n; i++) {
        int32_t c = byte_char((unsigned char)s[i]);
        if (c < 0x80) {
            *o++ = (char)c;
        } else {
            *o++ = (char)(0xC0 | (c >> 6));
            *o++ = (char)(0x80 | (c & 0x3F));
        }
    }
    b->n = (size_t)(o - b->p);
    b->p[b->n] = '\0';
    return true;
}

bool tr_tok_byte_level(const tok_pretok *pt, const char *s, size_t n, tok_buf *raw, tok_words *dst)
{
    if (n == 0) return true;
    if (pt->add_prefix_space && s[0] != ' ') {
        raw->n = 0;
        if (!tr_tok_buf_put(raw, " ", 1) || !tr_tok_buf_put(raw, s, n)) return false;
        s = raw->p;
        n = raw->n;
    }
    for (size_t i = 0; i < n;) {
        size_t e = pt->split ? piece_end(s, n, i) : n, off = dst->text.n;
        if (!put_bytes(&dst->text, s + i, e - i) || !tr_tok_spans_push(&dst->spans, off, dst->text.n - off))
            return false;
        i = e;
    }
    return true;
}
