/* unigram.c — the Unigram model: Viterbi over every vocabulary piece that
 * starts at each char of the word (found by hashing each prefix up to the longest piece),
 * maximising the sum of piece log-probabilities. A char no single-char piece covers is
 * an unknown with score min_score - 10; consecutive unknowns fuse into one unk id. Ties
 * and update order follow Hugging Face `tokenizers`' encode_optimized, so ids match. */
#include "tokenizer_impl.h"

#include <stdlib.h>

typedef struct node { double score; int64_t start; int32_t id; } node;

bool tr_tok_unigram(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_ids *out)
{
    if (n == 0) return true;
    node *best = malloc((n + 1) * sizeof *best);
    if (!best) return false;
    for (size_t i = 0; i <= n; i++) best[i] = (node){ 0.0, -1, -1 };
    const double unk_score = m->min_score - 10.0;
    size_t start = 0;
    while (start < n) {
        double here = best[start].score;
        int32_t cp;
        int mblen = tr_tok_utf8_next(w + start, n - start, &cp);
        if (mblen < 0) mblen = 1;
        bool has_single = false;
        size_t end = start;
        while (end < n && end - start < v->max_len) {
            end++;
            while (end < n && ((unsigned char)w[end] & 0xC0) == 0x80) end++;
            if (end - start > v->max_len) break;
            int32_t id = tr_tok_vocab_find(v, w + start, end - start);
            if (id < 0 || id >= m->nvocab) continue;
            double cand = here + (double)v->score[id];
            node *t = &best[end];
            if (t->start < 0 || cand > t->score) *t = (node){ cand, (int64_t)start, id };
            if (end - start == (size_t)mblen) has_single = true;
        }
        if (!has_single) {
            node *t = &best[start + (size_t)mblen];
            double cand = here + unk_score;
            if (t->start < 0 || cand > t->score) *t = (node){ cand, (int64_t)start, m->unk_id };
        }
        start += (size_t)mblen;
    }
    /* backtrack, writing ids in reverse, then flip them into order */
    size_t mark = out->n;
    bool prev_unk = false;
    for (size_t e = n; e > 0;) {
        node *nd = &best[e];
        bool unk = nd->id == m->unk_id;
        if (!(unk && prev_unk && m->fuse_unk) && !tr_tok_ids_push(out, nd->id)) {
            free(best);
            return false;
        }
        prev_unk = unk;
        e = (size_t)nd->start;
    }
    free(best);
    for (size_t a = mark, b = out->n - 1; a < b; a++, b--) {
        int32_t t = out->p[a];
        out->p[a] = out->p[b];
        out->p[b] = t;
    }
    return true;
}
