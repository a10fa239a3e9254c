/* encode.c — the public tokenizer API: loading a model folder, encoding a text
 * or a pair (added tokens -> normalize -> pre-tokenize -> model), longest-first
 * truncation, the post-processor's template (special tokens and token type ids, the
 * type ids applied even without special tokens, as Hugging Face `tokenizers` does), and
 * padded batches encoded in parallel with OpenMP.
 *
 * Invariant: the tokenizer is never written after tr_tok_load returns (but for the BPE
 * word cache, whose shards a thread holds while it uses them); every encode owns its
 * scratch buffers, so concurrent encodes are safe. */
#include "tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OOM(err) tr_fail(err, TR_EOOM, "tokenizer: out of host memory while encoding")

/* ------------------------------------------------------------ lifetime */
void tr_tok_release(tr_tokenizer *tok)
{
    tr_tok_vocab_free(&tok->vocab);
    for (int i = 0; i < tok->nnorm; i++) {
        free(tok->norm[i].charsmap);
        free(tok->norm[i].pattern);
        free(tok->norm[i].content);
    }
    for (int i = 0; i < tok->nadded; i++) free(tok->added[i].content);
    free(tok->added);
    tr_tok_bpe_free(tok->model.bpe);
}

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int tr_tok_load(tr_tokenizer **out, const char *dir, tr_error *err)
{
    *out = NULL;
    if (!dir) return tr_fail(err, TR_EUSER, "tokenizer: no model folder given");
    tr_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return tr_fail(err, TR_EOOM, "tokenizer: out of host memory");
    size_t n = strlen(dir) + 32;
    char *path = malloc(n);
    if (!path) { free(tok); return tr_fail(err, TR_EOOM, "tokenizer: out of host memory"); }
    int rc;
    snprintf(path, n, "%s/tokenizer.json", dir);
    if (file_exists(path)) {
        rc = tr_tok_load_json(tok, path, err);
    } else {
        snprintf(path, n, "%s/vocab.txt", dir);
        if (file_exists(path))
            rc = tr_tok_load_vocab_txt(tok, path, err);
        else
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s has neither tokenizer.json nor vocab.txt; point the model at a Hugging Face model folder", dir);
    }
    free(path);
    if (rc) {
        tr_tok_release(tok);
        free(tok);
        return rc;
    }
    *out = tok;
    return TR_OK;
}

void tr_tok_free(tr_tokenizer *tok)
{
    if (!tok) return;
    tr_tok_release(tok);
    free(tok);
}

/* ------------------------------------------------------------ one sequence */
typedef struct scratch {
    tok_pieces raw, sub;
    tok_buf norm;
    tok_pre_scratch pre;
    tok_bpe_work bpe;
} scratch;

static void scratch_free(scratch *s)
{
    free(s->raw.p);
    free(s->sub.p);
    tr_tok_buf_free(&s->norm);
    tr_tok_pre_scratch_free(&s->pre);
    tr_tok_bpe_work_free(&s->bpe);
}

static bool valid_utf8(const char *s, size_t n, size_t *bad)
{
    for (size_t i = 0; i < n;) {
        int32_t c;
        int k = tr_tok_utf8_next(s + i, n - i, &c);
        if (k < 0) { *bad = i; return false; }
        i += (size_t)k;
    }
    return true;
}

static bool model_word(const tr_tokenizer *tok, const char *w, size_t n, scratch *sc, tok_ids *ids)
{
    switch (tok->model.kind) {
    case TOK_MODEL_UNIGRAM: return tr_tok_unigram(&tok->model, &tok->vocab, w, n, ids);
    case TOK_MODEL_BPE: return tr_tok_bpe(&tok->model, &tok->vocab, w, n, &sc->bpe, ids);
    default: return tr_tok_wordpiece(&tok->model, &tok->vocab, w, n, ids);
    }
}

static int encode_seq(const tr_tokenizer *tok, const char *text, scratch *sc, tok_ids *ids, tr_error *err)
{
    size_t n = strlen(text), bad;
    if (!valid_utf8(text, n, &bad))
        return tr_fail(err, TR_EUSER, "tokenizer: the text is not valid UTF-8 (byte %zu of \"%.40s\"); decode the input as UTF-8 first", bad, text);
    if (!tr_tok_split_added(tok->added, tok->nadded, false, text, n, &sc->raw)) return OOM(err);
    for (size_t i = 0; i < sc->raw.n; i++) {
        tok_piece p = sc->raw.p[i];
        if (p.added_id >= 0) {
            if (!tr_tok_ids_push(ids, p.added_id)) return OOM(err);
            continue;
        }
        if (!tr_tok_normalize(tok->norm, tok->nnorm, text + p.off, p.len, &sc->norm)) return OOM(err);
        if (!tr_tok_split_added(tok->added, tok->has_normalized_added ? tok->nadded : 0, true,
                             sc->norm.p, sc->norm.n, &sc->sub))
            return OOM(err);
        for (size_t j = 0; j < sc->sub.n; j++) {
            tok_piece q = sc->sub.p[j];
            if (q.added_id >= 0) {
                if (!tr_tok_ids_push(ids, q.added_id)) return OOM(err);
                continue;
            }
            const tok_words *words;
            if (!tr_tok_pretokenize(tok->pretok, tok->npretok, sc->norm.p + q.off, q.len,
                                    p.off == 0 && q.off == 0, &sc->pre, &words))
                return OOM(err);
            for (size_t w = 0; w < words->spans.n; w++)
                if (!model_word(tok, words->text.p + words->spans.p[w].off, words->spans.p[w].len, sc, ids))
                    return OOM(err);
        }
    }
    return TR_OK;
}

/* ------------------------------------------------------------ truncation + template */
int32_t tr_tok_num_special(const tr_tokenizer *tok, int32_t pair)
{
    const tok_item *items = pair ? tok->tmpl.pair : tok->tmpl.single;
    int n = pair ? tok->tmpl.npair : tok->tmpl.nsingle, k = 0;
    for (int i = 0; i < n; i++)
        if (items[i].kind == TOK_ITEM_SPECIAL) k += items[i].nids;
    return k;
}

/* Longest first, as `tokenizers` does: only the longer is cut if that suffices, else
 * both get half the budget (the longer one the odd id). */
static void truncate_pair(size_t *na, size_t *nb, size_t max)
{
    if (*na + *nb <= max) return;
    size_t n1 = *na, n2 = *nb;
    bool swap = n1 > n2;
    if (swap) { size_t t = n1; n1 = n2; n2 = t; }
    n2 = n1 > max ? n1 : (n1 > max - n1 ? n1 : max - n1);
    if (n1 + n2 > max) {
        n1 = max / 2;
        n2 = n1 + max % 2;
    }
    if (swap) { size_t t = n1; n1 = n2; n2 = t; }
    if (n1 < *na) *na = n1;
    if (n2 < *nb) *nb = n2;
}

static int encode_one(const tr_tokenizer *tok, const char *text, const char *pair,
                      const tr_tok_options *opt, scratch *sc, tr_tok_encoding *out, tr_error *err)
{
    tok_ids a = { 0 }, b = { 0 };
    int rc = encode_seq(tok, text, sc, &a, err);
    if (!rc && pair) rc = encode_seq(tok, pair, sc, &b, err);
    if (rc) goto done;
    bool special = opt->add_special_tokens != 0;
    int32_t nspecial = special ? tr_tok_num_special(tok, pair != NULL) : 0;
    if (opt->max_length > 0) {
        if (opt->max_length < nspecial) {
            rc = tr_fail(err, TR_EUSER, "tokenizer: max_length %d is shorter than the %d special tokens added to each %s; raise max_length", opt->max_length, nspecial, pair ? "pair" : "text");
            goto done;
        }
        size_t budget = (size_t)(opt->max_length - nspecial);
        if (pair) truncate_pair(&a.n, &b.n, budget);
        else if (a.n > budget) a.n = budget;
    }
    const tok_item *items = pair ? tok->tmpl.pair : tok->tmpl.single;
    int nitems = pair ? tok->tmpl.npair : tok->tmpl.nsingle;
    /* no post-processor (or ByteLevel's alone): the pair's second text keeps type id 1 */
    static const tok_item no_template[2] = { { TOK_ITEM_SEQ_A, 0, { 0 }, 0 }, { TOK_ITEM_SEQ_B, 1, { 0 }, 0 } };
    if (nitems == 0) { items = no_template; nitems = pair ? 2 : 1; }
    /* sized by walking the template: a template may name a sequence twice */
    size_t total = 0;
    for (int i = 0; i < nitems; i++)
        total += items[i].kind == TOK_ITEM_SPECIAL ? (size_t)items[i].nids
                 : items[i].kind == TOK_ITEM_SEQ_B ? b.n : a.n;
    out->ids = malloc((total ? total : 1) * sizeof(int32_t));
    out->type_ids = malloc((total ? total : 1) * sizeof(int32_t));
    if (!out->ids || !out->type_ids) { rc = OOM(err); goto done; }
    size_t k = 0;
    for (int i = 0; i < nitems; i++) {
        const tok_item *it = &items[i];
        if (it->kind == TOK_ITEM_SPECIAL) {
            if (!special) continue;
            for (int j = 0; j < it->nids; j++) { out->ids[k] = it->ids[j]; out->type_ids[k++] = it->type_id; }
        } else {
            const tok_ids *s = it->kind == TOK_ITEM_SEQ_B ? &b : &a;
            if (it->kind == TOK_ITEM_SEQ_B && !pair) continue;
            for (size_t j = 0; j < s->n; j++) { out->ids[k] = s->p[j]; out->type_ids[k++] = it->type_id; }
        }
    }
    out->n = (int32_t)k;
done:
    tr_tok_ids_free(&a);
    tr_tok_ids_free(&b);
    if (rc) tr_tok_encoding_free(out);
    return rc;
}

static const tr_tok_options default_options = { 1, 0, 0 };

int tr_tok_encode(const tr_tokenizer *tok, const char *text, const char *pair,
                  const tr_tok_options *opt, tr_tok_encoding *out, tr_error *err)
{
    memset(out, 0, sizeof *out);
    if (!tok || !text) return tr_fail(err, TR_EUSER, "tokenizer: tr_tok_encode needs a tokenizer and a text");
    scratch sc = { 0 };
    int rc = encode_one(tok, text, pair, opt ? opt : &default_options, &sc, out, err);
    scratch_free(&sc);
    return rc;
}

void tr_tok_encoding_free(tr_tok_encoding *enc)
{
    if (!enc) return;
    free(enc->ids);
    free(enc->type_ids);
    memset(enc, 0, sizeof *enc);
}

/* ------------------------------------------------------------ batches */
int tr_tok_encode_batch(const tr_tokenizer *tok, const char *const *texts,
                        const char *const *pairs, int32_t batch, const tr_tok_options *opt,
                        tr_tok_batch *out, tr_error *err)
{
    memset(out, 0, sizeof *out);
    if (!tok || !texts || batch <= 0)
        return tr_fail(err, TR_EUSER, "tokenizer: tr_tok_encode_batch needs a tokenizer, texts and batch > 0 (got %d)", batch);
    if (!opt) opt = &default_options;
    tr_tok_encoding *enc = calloc((size_t)batch, sizeof *enc);
    int *status = calloc((size_t)batch, sizeof *status);
    if (!enc || !status) { free(enc); free(status); return tr_fail(err, TR_EOOM, "tokenizer: out of host memory"); }
    int first_bad = -1;
    /* Threads only pay off for large batches: a training batch of 16-64 rows encodes in
     * well under a millisecond, less than waking a team on a busy machine costs. */
#pragma omp parallel if (batch >= 256)
    {
        scratch sc = { 0 };
#pragma omp for schedule(dynamic, 16)
        for (int32_t i = 0; i < batch; i++) {
            if (!texts[i]) { status[i] = TR_EUSER; continue; }
            status[i] = encode_one(tok, texts[i], pairs ? pairs[i] : NULL, opt, &sc, &enc[i], NULL);
        }
        scratch_free(&sc);
    }
    int rc = TR_OK;
    for (int32_t i = 0; i < batch && first_bad < 0; i++)
        if (status[i]) first_bad = i;
    if (first_bad >= 0) {
        /* re-run the failing row alone to get its message */
        tr_tok_encoding e;
        const char *t = texts[first_bad];
        if (!t) rc = tr_fail(err, TR_EUSER, "tokenizer: texts[%d] is NULL", first_bad);
        else rc = tr_tok_encode(tok, t, pairs ? pairs[first_bad] : NULL, opt, &e, err);
        tr_tok_encoding_free(&e);
        if (rc == TR_OK) rc = tr_fail(err, TR_EINTERNAL, "tokenizer: row %d failed once and then succeeded", first_bad);
        goto done;
    }
    int32_t T = opt->pad_to > 0 ? opt->pad_to : 0;
    for (int32_t i = 0; i < batch; i++)
        if (enc[i].n > T) {
            if (opt->pad_to > 0) {
                rc = tr_fail(err, TR_EUSER, "tokenizer: row %d has %d tokens, more than pad_to %d; set max_length <= pad_to to truncate", i, enc[i].n, opt->pad_to);
                goto done;
            }
            T = enc[i].n;
        }
    if (T == 0) T = 1;
    size_t cells = (size_t)batch * (size_t)T;
    out->ids = malloc(cells * sizeof(int32_t));
    out->type_ids = malloc(cells * sizeof(int32_t));
    out->attention_mask = malloc(cells * sizeof(int32_t));
    if (!out->ids || !out->type_ids || !out->attention_mask) {
        tr_tok_batch_free(out);
        rc = tr_fail(err, TR_EOOM, "tokenizer: out of host memory for a %d x %d batch", batch, T);
        goto done;
    }
    int32_t pad = tok->pad_id >= 0 ? tok->pad_id : 0;
    for (int32_t i = 0; i < batch; i++) {
        int32_t *ids = out->ids + (size_t)i * T, *ty = out->type_ids + (size_t)i * T;
        int32_t *m = out->attention_mask + (size_t)i * T;
        for (int32_t j = 0; j < T; j++) {
            bool real = j < enc[i].n;
            ids[j] = real ? enc[i].ids[j] : pad;
            ty[j] = real ? enc[i].type_ids[j] : 0;
            m[j] = real;
        }
    }
    out->batch = batch;
    out->seq_len = T;
done:
    for (int32_t i = 0; i < batch; i++) tr_tok_encoding_free(&enc[i]);
    free(enc);
    free(status);
    return rc;
}

void tr_tok_batch_free(tr_tok_batch *b)
{
    if (!b) return;
    free(b->ids);
    free(b->type_ids);
    free(b->attention_mask);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------ vocabulary queries */
int32_t tr_tok_vocab_size(const tr_tokenizer *tok) { return tok->vocab.n; }

const char *tr_tok_id_to_token(const tr_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->vocab.n ? tok->vocab.str[id] : NULL;
}

int32_t tr_tok_token_to_id(const tr_tokenizer *tok, const char *token)
{
    return token ? tr_tok_vocab_find(&tok->vocab, token, strlen(token)) : -1;
}

int32_t tr_tok_pad_id(const tr_tokenizer *tok) { return tok->pad_id; }
int32_t tr_tok_cls_id(const tr_tokenizer *tok) { return tok->cls_id; }
int32_t tr_tok_sep_id(const tr_tokenizer *tok) { return tok->sep_id; }
int32_t tr_tok_unk_id(const tr_tokenizer *tok) { return tok->unk_id; }
int32_t tr_tok_mask_id(const tr_tokenizer *tok) { return tok->mask_id; }
int32_t tr_tok_model_max_length(const tr_tokenizer *tok) { return tok->model_max_length; }
