/* unicode.c — `tokenizers`' answer where it differs from utf8proc's (tokenizer_impl.h), or -1
 * where utf8proc's stands: a binary search of the tables of unicode_tables.h, which
 * tests/ref/make_tokenizer_unicode.py generates. */
#include "tokenizer_impl.h"
#include "unicode_tables.h"

/* The override for c in t (value), or -1 when utf8proc's answer stands. */
static int32_t lookup(const range *t, int n, int32_t c)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < t[mid].lo) hi = mid - 1;
        else if (c > t[mid].hi) lo = mid + 1;
        else return t[mid].value;
    }
    return -1;
}

#define N(t) ((int)(sizeof t / sizeof t[0]))
int tr_tok_hf_control(int32_t c) { return lookup(control_ranges, N(control_ranges), c); }
int tr_tok_hf_punct(int32_t c) { return lookup(punct_ranges, N(punct_ranges), c); }
int tr_tok_hf_mn(int32_t c) { return lookup(mn_ranges, N(mn_ranges), c); }
int tr_tok_hf_keep(int32_t c) { return lookup(keep_ranges, N(keep_ranges), c); }
int32_t tr_tok_hf_lower(int32_t c) { return lookup(lower_ranges, N(lower_ranges), c); }
int tr_tok_hf_gpt2_class(int32_t c) { return lookup(gpt2_ranges, N(gpt2_ranges), c); }
