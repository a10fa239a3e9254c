/* bpe_load.c — reading tokenizer.json's model of type "BPE": the vocabulary object, the
 * merges (the older "left right" strings, "#version" lines skipped, or the [left, right]
 * pairs newer files hold), unk_token, continuing_subword_prefix, end_of_word_suffix,
 * fuse_unk, byte_fallback and ignore_merges, as `tokenizers`' BpeBuilder reads them.
 *
 * What `tokenizers` would only fail on while encoding (an unk_token missing from the
 * vocabulary) and what would make ids random (dropout above 0) is refused here, naming
 * the file and the key. Invariant: on failure the caller releases the partial model. */
#include "tokenizer_impl.h"

#include <jansson.h>
#include <string.h>

#define OOM(err) tr_fail(err, TR_EOOM, "tokenizer: out of host memory while loading")

/* A string-or-null key into dst ("" for null or absent). */
static int optional_string(json_t *m, const char *key, char *dst, size_t cap, const char *path, tr_error *err)
{
    json_t *v = json_object_get(m, key);
    dst[0] = '\0';
    if (!v || json_is_null(v)) return TR_OK;
    const char *s = json_string_value(v);
    if (!s) return tr_fail(err, TR_EUSER, "tokenizer: %s: model.%s must be a string or null", path, key);
    if (strlen(s) >= cap) return tr_fail(err, TR_EUSER, "tokenizer: %s: model.%s \"%s\" is longer than %zu bytes, which is not supported", path, key, s, cap - 1);
    strcpy(dst, s);
    return TR_OK;
}

static int32_t model_id(const tr_tokenizer *tok, const char *s, size_t n)
{
    return tr_tok_model_id(&tok->model, &tok->vocab, s, n);
}

/* One merge as its two strings; false when it is neither form. */
static bool merge_parts(json_t *it, const char **a, size_t *na, const char **b, size_t *nb)
{
    if (json_is_array(it)) {
        json_t *l = json_array_get(it, 0), *r = json_array_get(it, 1);
        if (json_array_size(it) != 2 || !json_is_string(l) || !json_is_string(r)) return false;
        *a = json_string_value(l);
        *na = json_string_length(l);
        *b = json_string_value(r);
        *nb = json_string_length(r);
        return true;
    }
    const char *s = json_string_value(it), *sp = s ? strchr(s, ' ') : NULL;
    if (!sp || strchr(sp + 1, ' ')) return false;   /* exactly one space, as split(' ') wants */
    *a = s;
    *na = (size_t)(sp - s);
    *b = sp + 1;
    *nb = strlen(sp + 1);
    return true;
}

/* Adds every merge in rank order; the merged token is left + right without the prefix. */
static int add_merges(tr_tokenizer *tok, json_t *merges, const char *path, tr_error *err)
{
    size_t plen = strlen(tok->model.prefix), i;
    json_t *it;
    tok_buf joined = { 0 };
    int32_t rank = 0;
    int rc = TR_OK;
    json_array_foreach(merges, i, it) {
        const char *a, *b, *s = json_string_value(it);
        size_t na, nb;
        if (s && strncmp(s, "#version", 8) == 0) continue;
        if (!merge_parts(it, &a, &na, &b, &nb)) {
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s: model.merges[%zu] is neither \"left right\" nor [\"left\", \"right\"]", path, i);
            break;
        }
        if (nb < plen) {
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s: model.merges[%zu]: \"%.*s\" is shorter than the continuing_subword_prefix", path, i, (int)nb, b);
            break;
        }
        joined.n = 0;
        if (!tr_tok_buf_put(&joined, a, na) || !tr_tok_buf_put(&joined, b + plen, nb - plen)) {
            rc = OOM(err);
            break;
        }
        int32_t l = model_id(tok, a, na), r = model_id(tok, b, nb), m = model_id(tok, joined.p, joined.n);
        if (l < 0 || r < 0 || m < 0) {
            const char *missing = l < 0 ? a : r < 0 ? b : joined.p;
            int nmissing = (int)(l < 0 ? na : r < 0 ? nb : joined.n);
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s: model.merges[%zu] (\"%.*s\" + \"%.*s\"): \"%.*s\" is not in model.vocab", path, i, (int)na, a, (int)nb, b, nmissing, missing);
            break;
        }
        if (!tr_tok_bpe_add_merge(tok->model.bpe, l, r, rank++, m)) {
            rc = OOM(err);
            break;
        }
    }
    tr_tok_buf_free(&joined);
    return rc;
}

int tr_tok_load_bpe(tr_tokenizer *tok, json_t *m, const char *path, tr_error *err)
{
    tok_model *md = &tok->model;
    int32_t n;
    int rc = tr_tok_load_vocab_object(tok, json_object_get(m, "vocab"), path, &n, err);
    if (rc) return rc;
    json_t *merges = json_object_get(m, "merges"), *dropout = json_object_get(m, "dropout");
    if (!json_is_array(merges)) return tr_fail(err, TR_EUSER, "tokenizer: %s: BPE model without a \"merges\" array", path);
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return tr_fail(err, TR_EUSER, "tokenizer: %s: model.dropout is %g; BPE dropout (random merges, a training-time augmentation) is not supported: set \"dropout\": null", path, json_number_value(dropout));
    md->kind = TOK_MODEL_BPE;
    md->nvocab = n;
    md->unk_id = -1;
    char unk[64];
    if ((rc = optional_string(m, "continuing_subword_prefix", md->prefix, sizeof md->prefix, path, err)) ||
        (rc = optional_string(m, "end_of_word_suffix", md->suffix, sizeof md->suffix, path, err)) ||
        (rc = optional_string(m, "unk_token", unk, sizeof unk, path, err)))
        return rc;
    md->fuse_unk = json_is_true(json_object_get(m, "fuse_unk"));
    md->byte_fallback = json_is_true(json_object_get(m, "byte_fallback"));
    md->ignore_merges = json_is_true(json_object_get(m, "ignore_merges"));
    if (!tr_tok_vocab_index(&tok->vocab)) return OOM(err);
    if (unk[0]) {
        md->unk_id = model_id(tok, unk, strlen(unk));
        if (md->unk_id < 0) return tr_fail(err, TR_EUSER, "tokenizer: %s: the unk_token \"%s\" is not in model.vocab", path, unk);
    }
    md->bpe = tr_tok_bpe_new(json_array_size(merges));
    if (!md->bpe) return OOM(err);
    if ((rc = add_merges(tok, merges, path, err))) return rc;
    if (!tr_tok_bpe_finish(md->bpe, md, &tok->vocab)) return OOM(err);
    return TR_OK;
}
