/* normalize.c — normalizers with Hugging Face `tokenizers` semantics:
 * BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase, in that
 * order), SentencePiece's Precompiled charsmap (as the spm_precompiled crate applies it:
 * per extended grapheme cluster, then per char), Strip, Replace, Lowercase, NFD/NFKD/
 * NFC/NFKC and StripAccents. Unicode properties and decompositions come from utf8proc.
 *
 * Invariant: every step maps valid UTF-8 to valid UTF-8. */
#include "tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------------ character classes */
bool tr_tok_is_whitespace(int32_t c)
{
    /* Rust's char::is_whitespace: the White_Space property. */
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* BertNormalizer's is_control: Cc, Cf, Co (and Cs) except \t \n \r. Unassigned code
 * points (Cn) are kept: the Rust table `tokenizers` uses has no Cn entries. */
static bool bert_is_control(int32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r') return false;
    int o = tr_tok_hf_control(c);
    if (o >= 0) return o;
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS;
}

static bool bert_is_chinese(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Rust's char::to_lowercase; U+0130 is the one code point whose full lowercase mapping
 * is two code points. */
static bool put_lower(tok_buf *out, int32_t c)
{
    if (c == 0x130) return tr_tok_buf_put(out, "i\xCC\x87", 3);
    int32_t o = tr_tok_hf_lower(c);
    return tr_tok_buf_put_cp(out, o >= 0 ? o : utf8proc_tolower(c));
}

/* A nonspacing mark (Mn) as strip_accents sees it. */
static bool is_mn(int32_t c)
{
    int o = tr_tok_hf_mn(c);
    return o >= 0 ? o : utf8proc_category(c) == UTF8PROC_CATEGORY_MN;
}

/* Canonical (or compatibility) decomposition of one code point; returns the count. */
static int decompose(int32_t c, bool compat, int32_t *dst, int cap)
{
    int last = 0;
    if (!compat && tr_tok_hf_keep(c) == 1) { dst[0] = c; return 1; }
    utf8proc_ssize_t n = utf8proc_decompose_char(
        c, dst, cap, (utf8proc_option_t)(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0)), &last);
    if (n < 0 || n > cap) { dst[0] = c; return 1; }
    return (int)n;
}

/* ------------------------------------------------------------ BertNormalizer */
static bool bert(const tok_norm *nm, const char *s, size_t n, tok_buf *out)
{
    size_t i = 0;
    while (i < n) {
        int32_t c;
        int k = tr_tok_utf8_next(s + i, n - i, &c);
        if (k < 0) return false;
        i += (size_t)k;
        if (nm->clean_text) {
            if (c == 0 || c == 0xFFFD || bert_is_control(c)) continue;
            if (c == '\t' || c == '\n' || c == '\r' || tr_tok_is_whitespace(c)) c = ' ';
        }
        bool pad = nm->chinese && bert_is_chinese(c);
        if (pad && !tr_tok_buf_put(out, " ", 1)) return false;
        if (nm->strip_accents) {
            int32_t d[32];
            int nd = decompose(c, false, d, 32);
            for (int j = 0; j < nd; j++) {
                if (is_mn(d[j])) continue;
                if (!(nm->lowercase ? put_lower(out, d[j]) : tr_tok_buf_put_cp(out, d[j]))) return false;
            }
        } else if (!(nm->lowercase ? put_lower(out, c) : tr_tok_buf_put_cp(out, c))) {
            return false;
        }
        if (pad && !tr_tok_buf_put(out, " ", 1)) return false;
    }
    return true;
}

/* ------------------------------------------------------------ Precompiled */
/* darts-clone double-array units. */
static uint32_t unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & 0x7FFFFFFFu; }
static uint32_t unit_label(uint32_t u) { return u & (0x80000000u | 0xFFu); }
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

bool tr_tok_precompiled_init(tok_norm *nm)
{
    if (nm->charsmap_len < 4) return false;
    const uint8_t *b = nm->charsmap;
    uint32_t trie_bytes = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (trie_bytes % 4 || trie_bytes == 0 || (size_t)trie_bytes > nm->charsmap_len - 4) return false;
    nm->trie = (const uint32_t *)(b + 4);   /* the blob is malloc'd, so 4 is aligned */
    nm->trie_units = trie_bytes / 4;
    nm->normalized = (const char *)(b + 4 + trie_bytes);
    nm->normalized_len = nm->charsmap_len - 4 - trie_bytes;
    return true;
}

/* The replacement for chunk, taken from the FIRST (shortest) prefix match, replacing the
 * whole chunk — exactly what spm_precompiled's transform does. */
static bool precompiled_lookup(const tok_norm *nm, const char *s, size_t n, const char **rep, size_t *rep_len)
{
    const uint32_t *a = nm->trie;
    size_t pos = 0;
    pos ^= unit_offset(a[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= nm->trie_units) return false;
        uint32_t u = a[pos];
        if (unit_label(u) != c) return false;
        pos ^= unit_offset(u);
        if (pos >= nm->trie_units) return false;
        if (unit_has_leaf(u)) {
            size_t v = unit_value(a[pos]);
            if (v >= nm->normalized_len) return false;
            const char *r = nm->normalized + v;
            size_t len = strnlen(r, nm->normalized_len - v);
            *rep = r;
            *rep_len = len;
            return true;
        }
    }
    return false;
}

static bool precompiled(const tok_norm *nm, const char *s, size_t n, tok_buf *out)
{
    size_t i = 0;
    while (i < n) {
        /* one extended grapheme cluster: [i, j) */
        int32_t prev, c;
        int k = tr_tok_utf8_next(s + i, n - i, &prev);
        if (k < 0) return false;
        size_t j = i + (size_t)k;
        utf8proc_int32_t state = 0;
        while (j < n) {
            int kk = tr_tok_utf8_next(s + j, n - j, &c);
            if (kk < 0) return false;
            if (utf8proc_grapheme_break_stateful(prev, c, &state)) break;
            prev = c;
            j += (size_t)kk;
        }
        const char *rep;
        size_t rep_len;
        if (j - i < 6 && precompiled_lookup(nm, s + i, j - i, &rep, &rep_len)) {
            if (!tr_tok_buf_put(out, rep, rep_len)) return false;
        } else {
            size_t p = i;
            while (p < j) {
                int kk = tr_tok_utf8_next(s + p, j - p, &c);
                if (precompiled_lookup(nm, s + p, (size_t)kk, &rep, &rep_len)) {
                    if (!tr_tok_buf_put(out, rep, rep_len)) return false;
                } else if (!tr_tok_buf_put(out, s + p, (size_t)kk)) {
                    return false;
                }
                p += (size_t)kk;
            }
        }
        i = j;
    }
    return true;
}

/* ------------------------------------------------------------ simple steps */
static bool strip(const tok_norm *nm, const char *s, size_t n, tok_buf *out)
{
    size_t b = 0, e = n;
    int32_t c;
    while (nm->left && b < e) {
        int k = tr_tok_utf8_next(s + b, e - b, &c);
        if (k < 0 || !tr_tok_is_whitespace(c)) break;
        b += (size_t)k;
    }
    while (nm->right && e > b) {
        size_t p = e - 1;
        while (p > b && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
        int k = tr_tok_utf8_next(s + p, e - p, &c);
        if (k < 0 || !tr_tok_is_whitespace(c)) break;
        e = p;
    }
    return tr_tok_buf_put(out, s + b, e - b);
}

static bool replace(const tok_norm *nm, const char *s, size_t n, tok_buf *out)
{
    size_t plen = strlen(nm->pattern), clen = strlen(nm->content), i = 0;
    while (i < n) {
        if (nm->kind == TOK_NORM_REPLACE_SPACES) {
            size_t j = i;
            while (j < n && s[j] == ' ') j++;
            if (j - i >= 2) {
                if (!tr_tok_buf_put(out, nm->content, clen)) return false;
                i = j;
                continue;
            }
        } else if (plen && i + plen <= n && memcmp(s + i, nm->pattern, plen) == 0) {
            if (!tr_tok_buf_put(out, nm->content, clen)) return false;
            i += plen;
            continue;
        }
        if (!tr_tok_buf_put(out, s + i, 1)) return false;
        i++;
    }
    return true;
}

static bool per_char(const tok_norm *nm, const char *s, size_t n, tok_buf *out)
{
    size_t i = 0;
    while (i < n) {
        int32_t c, d[32];
        int k = tr_tok_utf8_next(s + i, n - i, &c);
        if (k < 0) return false;
        i += (size_t)k;
        if (nm->kind == TOK_NORM_LOWERCASE) {
            if (!put_lower(out, c)) return false;
            continue;
        }
        int nd = decompose(c, false, d, 32);
        for (int j = 0; j < nd; j++)
            if (!is_mn(d[j]) && !tr_tok_buf_put_cp(out, d[j])) return false;
    }
    return true;
}

static bool unicode_form(const tok_norm *nm, const char *s, size_t n, tok_buf *out)
{
    int opt = UTF8PROC_STABLE;
    switch (nm->kind) {
    case TOK_NORM_NFD: opt |= UTF8PROC_DECOMPOSE; break;
    case TOK_NORM_NFKD: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    case TOK_NORM_NFC: opt |= UTF8PROC_COMPOSE; break;
    default: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t len = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r,
                                        (utf8proc_option_t)opt);
    if (len < 0) return false;
    bool ok = tr_tok_buf_put(out, (const char *)r, (size_t)len);
    free(r);
    return ok;
}

/* ------------------------------------------------------------ the chain */
bool tr_tok_normalize(const tok_norm *steps, int nsteps, const char *s, size_t n, tok_buf *out)
{
    tok_buf a = { 0 }, b = { 0 };
    if (!tr_tok_buf_put(&a, s, n)) return false;
    for (int k = 0; k < nsteps; k++) {
        const tok_norm *nm = &steps[k];
        b.n = 0;
        if (!tr_tok_buf_reserve(&b, a.n)) goto fail;
        bool ok;
        switch (nm->kind) {
        case TOK_NORM_BERT: ok = bert(nm, a.p, a.n, &b); break;
        case TOK_NORM_PRECOMPILED: ok = precompiled(nm, a.p, a.n, &b); break;
        case TOK_NORM_STRIP: ok = strip(nm, a.p, a.n, &b); break;
        case TOK_NORM_REPLACE:
        case TOK_NORM_REPLACE_SPACES: ok = replace(nm, a.p, a.n, &b); break;
        case TOK_NORM_LOWERCASE:
        case TOK_NORM_STRIP_ACCENTS: ok = per_char(nm, a.p, a.n, &b); break;
        default: ok = unicode_form(nm, a.p, a.n, &b); break;
        }
        if (!ok) goto fail;
        b.p[b.n] = '\0';
        tok_buf t = a; a = b; b = t;
    }
    out->n = 0;
    bool ok = tr_tok_buf_put(out, a.p, a.n);
    tr_tok_buf_free(&a);
    tr_tok_buf_free(&b);
    return ok;
fail:
    tr_tok_buf_free(&a);
    tr_tok_buf_free(&b);
    return false;
}
