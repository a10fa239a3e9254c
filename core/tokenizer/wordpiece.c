/* wordpiece.c — WordPiece: greedy longest-match-first over one word, later
 * pieces looked up with the continuing-subword prefix ("##"). A word longer than
 * max_input_chars_per_word chars, or one with any unmatched rest, becomes the single
 * unknown token — as Hugging Face `tokenizers` does. */
#include "tokenizer_impl.h"

#include <string.h>

static size_t count_chars(const char *w, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)w[i] & 0xC0) != 0x80;
    return c;
}

bool tr_tok_wordpiece(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_ids *out)
{
    size_t mark = out->n;
    if ((int64_t)count_chars(w, n) > (int64_t)m->max_chars) return tr_tok_ids_push(out, m->unk_id);
    size_t plen = strlen(m->prefix);
    char buf[512];
    size_t start = 0;
    while (start < n) {
        size_t end = n;
        int32_t found = -1;
        while (end > start) {
            size_t len = end - start;
            int32_t id;
            if (start == 0) {
                id = tr_tok_vocab_find(v, w, len);
            } else if (plen + len <= sizeof buf) {
                memcpy(buf, m->prefix, plen);
                memcpy(buf + plen, w + start, len);
                id = tr_tok_vocab_find(v, buf, plen + len);
            } else {
                id = -1;   /* longer than any token can be */
            }
            if (id >= 0 && id < m->nvocab) {
                found = id;
                break;
            }
            end--;   /* back to the previous char boundary */
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0) {
            out->n = mark;
            return tr_tok_ids_push(out, m->unk_id);
        }
        if (!tr_tok_ids_push(out, found)) return false;
        start = end;
    }
    return true;
}
