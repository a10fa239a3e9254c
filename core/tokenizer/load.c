/* load.c — reading a tokenizer from a model folder: tokenizer.json (jansson)
 * with the parts core/tokenizer/tokenizer_impl.h models (the BPE model in bpe_load.c),
 * tokenizer_config.json's overrides of a BertNormalizer, or vocab.txt +
 * tokenizer_config.json as transformers' BertTokenizerFast builds them. Anything not
 * modelled (another model type, a regex Replace other than " {2,}", a Split on another
 * pattern, Unigram byte fallback) is TR_EUSER naming the file and the key, never a silent
 * approximation.
 *
 * Invariant: on failure the partly filled tokenizer is released by the caller
 * (tr_tok_release), so every path may return early. */
#include "tokenizer_impl.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OOM(err) tr_fail(err, TR_EOOM, "tokenizer: out of host memory while loading")

/* ------------------------------------------------------------ small helpers */
static bool jbool(json_t *o, const char *key, bool dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static const char *jstr(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* A special-token entry of tokenizer_config.json: a string or {"content": ...}. */
static const char *token_name(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

static int b64_value(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Decodes base64 into a malloc'd blob; false when malformed or on OOM (*out NULL). */
static bool b64_decode(const char *s, uint8_t **out, size_t *out_len)
{
    size_t n = strlen(s);
    uint8_t *b = malloc(n / 4 * 3 + 4);
    *out = NULL;
    if (!b) return false;
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) { free(b); return false; }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[k++] = (uint8_t)(acc >> bits);
        }
    }
    *out = b;
    *out_len = k;
    return true;
}

/* A Sequence (normalizer, pre_tokenizer or post_processor): each step of the array under
 * key through add, in order. */
typedef int (*add_step)(tr_tokenizer *tok, json_t *o, const char *path, tr_error *err);

static int add_sequence(tr_tokenizer *tok, json_t *o, const char *key, const char *what, add_step add,
                        const char *path, tr_error *err)
{
    json_t *list = json_object_get(o, key), *it;
    size_t i;
    if (!json_is_array(list)) return tr_fail(err, TR_EUSER, "tokenizer: %s: %s Sequence without a \"%s\" array", path, what, key);
    json_array_foreach(list, i, it) {
        int rc = add(tok, it, path, err);
        if (rc) return rc;
    }
    return TR_OK;
}

/* ------------------------------------------------------------ normalizer */
static int add_norm(tr_tokenizer *tok, json_t *o, const char *path, tr_error *err)
{
    if (json_is_null(o) || !o) return TR_OK;
    const char *type = jstr(o, "type");
    if (!type) return tr_fail(err, TR_EUSER, "tokenizer: %s: a normalizer has no \"type\"; the file is not a Hugging Face tokenizer.json", path);
    if (strcmp(type, "Sequence") == 0) return add_sequence(tok, o, "normalizers", "normalizer", add_norm, path, err);
    if (tok->nnorm == (int)(sizeof tok->norm / sizeof tok->norm[0]))
        return tr_fail(err, TR_EUSER, "tokenizer: %s: more than 8 normalizer steps are not supported", path);
    tok_norm *nm = &tok->norm[tok->nnorm];
    memset(nm, 0, sizeof *nm);
    if (strcmp(type, "BertNormalizer") == 0) {
        nm->kind = TOK_NORM_BERT;
        nm->clean_text = jbool(o, "clean_text", true);
        nm->chinese = jbool(o, "handle_chinese_chars", true);
        nm->lowercase = jbool(o, "lowercase", true);
        /* null strip_accents means: strip exactly when lowercasing */
        nm->strip_accents = jbool(o, "strip_accents", nm->lowercase);
    } else if (strcmp(type, "Precompiled") == 0) {
        nm->kind = TOK_NORM_PRECOMPILED;
        const char *b64 = jstr(o, "precompiled_charsmap");
        if (!b64) {   /* an empty charsmap is the identity */
            return TR_OK;
        }
        if (!b64_decode(b64, &nm->charsmap, &nm->charsmap_len))
            return tr_fail(err, TR_EUSER, "tokenizer: %s: normalizer Precompiled has a \"precompiled_charsmap\" that is not valid base64", path);
        if (nm->charsmap_len == 0) {   /* an empty charsmap is the identity */
            free(nm->charsmap);
            nm->charsmap = NULL;
            return TR_OK;
        }
        tok->nnorm++;   /* owned now, released by tr_tok_release */
        if (!tr_tok_precompiled_init(nm))
            return tr_fail(err, TR_EUSER, "tokenizer: %s: normalizer Precompiled: the charsmap is truncated or not a SentencePiece double-array trie", path);
        return TR_OK;
    } else if (strcmp(type, "Strip") == 0) {
        nm->kind = TOK_NORM_STRIP;
        nm->left = jbool(o, "strip_left", true);
        nm->right = jbool(o, "strip_right", true);
    } else if (strcmp(type, "Replace") == 0) {
        json_t *pat = json_object_get(o, "pattern");
        const char *content = jstr(o, "content");
        const char *lit = jstr(pat, "String"), *re = jstr(pat, "Regex");
        if (!content || (!lit && !re))
            return tr_fail(err, TR_EUSER, "tokenizer: %s: normalizer Replace needs \"pattern\" {\"String\" or \"Regex\"} and \"content\"", path);
        if (re && strcmp(re, " {2,}") != 0)
            return tr_fail(err, TR_EUSER, "tokenizer: %s: normalizer Replace with regex \"%s\" is not supported (only \" {2,}\" and literal strings)", path, re);
        nm->kind = re ? TOK_NORM_REPLACE_SPACES : TOK_NORM_REPLACE;
        nm->pattern = strdup(re ? " " : lit);
        nm->content = strdup(content);
        tok->nnorm++;
        if (!nm->pattern || !nm->content) return OOM(err);
        return TR_OK;
    } else if (strcmp(type, "Lowercase") == 0) {
        nm->kind = TOK_NORM_LOWERCASE;
    } else if (strcmp(type, "StripAccents") == 0) {
        nm->kind = TOK_NORM_STRIP_ACCENTS;
    } else if (strcmp(type, "NFD") == 0) {
        nm->kind = TOK_NORM_NFD;
    } else if (strcmp(type, "NFKD") == 0) {
        nm->kind = TOK_NORM_NFKD;
    } else if (strcmp(type, "NFC") == 0) {
        nm->kind = TOK_NORM_NFC;
    } else if (strcmp(type, "NFKC") == 0) {
        nm->kind = TOK_NORM_NFKC;
    } else {
        return tr_fail(err, TR_EUSER, "tokenizer: %s: normalizer type \"%s\" is not supported (BertNormalizer, Precompiled, Strip, Replace, Lowercase, StripAccents, NF[K]C/D, Sequence are)", path, type);
    }
    tok->nnorm++;
    return TR_OK;
}

/* transformers' BertTokenizerFast rebuilds the normalizer when tokenizer_config.json's
 * do_lower_case / strip_accents / tokenize_chinese_chars differ from it (defaults true,
 * null, true). Only for a Bert-family tokenizer_class, and only over a BertNormalizer. */
static void apply_config_overrides(tr_tokenizer *tok, json_t *cfg, bool vocab_txt)
{
    if ((!cfg && !vocab_txt) || tok->nnorm != 1 || tok->norm[0].kind != TOK_NORM_BERT) return;
    const char *cls = jstr(cfg, "tokenizer_class");
    if (cls && !strstr(cls, "Bert") && !strstr(cls, "Electra")) return;
    tok_norm *nm = &tok->norm[0];
    nm->lowercase = jbool(cfg, "do_lower_case", true);
    nm->chinese = jbool(cfg, "tokenize_chinese_chars", true);
    nm->strip_accents = jbool(cfg, "strip_accents", nm->lowercase);
}

/* ------------------------------------------------------------ pre-tokenizer */
/* GPT-2's split pattern, as tokenizer.json spells a Split on it. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int add_pretok(tr_tokenizer *tok, json_t *o, const char *path, tr_error *err)
{
    if (!o || json_is_null(o)) return TR_OK;
    const char *type = jstr(o, "type");
    if (!type) return tr_fail(err, TR_EUSER, "tokenizer: %s: a pre_tokenizer has no \"type\"", path);
    if (strcmp(type, "Sequence") == 0) return add_sequence(tok, o, "pretokenizers", "pre_tokenizer", add_pretok, path, err);
    if (tok->npretok == (int)(sizeof tok->pretok / sizeof tok->pretok[0]))
        return tr_fail(err, TR_EUSER, "tokenizer: %s: more than 4 pre_tokenizer steps are not supported", path);
    tok_pretok *pt = &tok->pretok[tok->npretok];
    memset(pt, 0, sizeof *pt);
    if (strcmp(type, "BertPreTokenizer") == 0) {
        pt->kind = TOK_PRE_BERT;
    } else if (strcmp(type, "WhitespaceSplit") == 0) {
        pt->kind = TOK_PRE_WHITESPACE_SPLIT;
    } else if (strcmp(type, "ByteLevel") == 0) {
        pt->kind = TOK_PRE_BYTE_LEVEL;
        pt->add_prefix_space = jbool(o, "add_prefix_space", true);
        pt->split = jbool(o, "use_regex", true);
    } else if (strcmp(type, "Split") == 0) {
        const char *re = jstr(json_object_get(o, "pattern"), "Regex"), *behavior = jstr(o, "behavior");
        if (!re || strcmp(re, gpt2_pattern) != 0 || !behavior || strcmp(behavior, "Isolated") != 0 ||
            jbool(o, "invert", false))
            return tr_fail(err, TR_EUSER, "tokenizer: %s: a pre_tokenizer Split is supported only on GPT-2's pattern (%s) with behavior \"Isolated\", not inverted", path, gpt2_pattern);
        pt->kind = TOK_PRE_GPT2_SPLIT;
    } else if (strcmp(type, "Metaspace") == 0) {
        pt->kind = TOK_PRE_METASPACE;
        const char *rep = jstr(o, "replacement");
        if (!rep) rep = "\xE2\x96\x81";
        if (strlen(rep) >= sizeof pt->replacement || !*rep)
            return tr_fail(err, TR_EUSER, "tokenizer: %s: Metaspace \"replacement\" must be one character", path);
        strcpy(pt->replacement, rep);
        const char *scheme = jstr(o, "prepend_scheme");
        if (scheme) {
            if (strcmp(scheme, "always") == 0) pt->prepend = TOK_PREPEND_ALWAYS;
            else if (strcmp(scheme, "first") == 0) pt->prepend = TOK_PREPEND_FIRST;
            else if (strcmp(scheme, "never") == 0) pt->prepend = TOK_PREPEND_NEVER;
            else return tr_fail(err, TR_EUSER, "tokenizer: %s: Metaspace prepend_scheme \"%s\" is not one of always, first, never", path, scheme);
        } else {
            pt->prepend = jbool(o, "add_prefix_space", true) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        }
        pt->split = jbool(o, "split", true);
    } else {
        return tr_fail(err, TR_EUSER, "tokenizer: %s: pre_tokenizer type \"%s\" is not supported (BertPreTokenizer, ByteLevel, Metaspace, WhitespaceSplit, Split on GPT-2's pattern and a Sequence of them are)", path, type);
    }
    tok->npretok++;
    return TR_OK;
}

/* ------------------------------------------------------------ model */
static int set_model(tr_tokenizer *tok, json_t *m, const char *path, tr_error *err)
{
    if (!json_is_object(m)) return tr_fail(err, TR_EUSER, "tokenizer: %s: no \"model\" object; the file is not a Hugging Face tokenizer.json", path);
    json_t *vocab = json_object_get(m, "vocab");
    const char *type = jstr(m, "type");
    if (!type) type = json_is_array(vocab) ? "Unigram" : json_object_get(m, "merges") ? "BPE" : "WordPiece";
    tok_model *md = &tok->model;
    md->unk_id = -1;
    if (strcmp(type, "BPE") == 0) return tr_tok_load_bpe(tok, m, path, err);
    if (strcmp(type, "WordPiece") == 0) {
        int32_t n;
        int rc = tr_tok_load_vocab_object(tok, vocab, path, &n, err);
        if (rc) return rc;
        md->kind = TOK_MODEL_WORDPIECE;
        md->nvocab = n;
        const char *prefix = jstr(m, "continuing_subword_prefix");
        if (!prefix) prefix = "##";
        if (strlen(prefix) >= sizeof md->prefix) return tr_fail(err, TR_EUSER, "tokenizer: %s: continuing_subword_prefix is too long", path);
        strcpy(md->prefix, prefix);
        json_t *mx = json_object_get(m, "max_input_chars_per_word");
        md->max_chars = json_is_integer(mx) ? (int32_t)json_integer_value(mx) : 100;
        const char *unk = jstr(m, "unk_token");
        if (!unk) unk = "[UNK]";
        if (!tr_tok_vocab_index(&tok->vocab)) return OOM(err);
        md->unk_id = tr_tok_vocab_find(&tok->vocab, unk, strlen(unk));
        if (md->unk_id < 0) return tr_fail(err, TR_EUSER, "tokenizer: %s: the unk_token \"%s\" is not in model.vocab", path, unk);
        return TR_OK;
    }
    if (strcmp(type, "Unigram") == 0) {
        if (!json_is_array(vocab)) return tr_fail(err, TR_EUSER, "tokenizer: %s: Unigram model without a \"vocab\" array", path);
        if (jbool(m, "byte_fallback", false))
            return tr_fail(err, TR_EUSER, "tokenizer: %s: Unigram byte_fallback is not supported", path);
        size_t n = json_array_size(vocab), i;
        json_t *it;
        tok->vocab.score = calloc(n ? n : 1, sizeof(float));
        if (!tok->vocab.score) return OOM(err);
        md->min_score = 1e300;
        json_array_foreach(vocab, i, it) {
            const char *s = json_string_value(json_array_get(it, 0));
            json_t *sc = json_array_get(it, 1);
            if (!s || !json_is_number(sc))
                return tr_fail(err, TR_EUSER, "tokenizer: %s: model.vocab[%zu] is not [piece, score]", path, i);
            if (!tr_tok_vocab_set(&tok->vocab, (int32_t)i, s, strlen(s))) return OOM(err);
            tok->vocab.score[i] = (float)json_number_value(sc);
            if (json_number_value(sc) < md->min_score) md->min_score = json_number_value(sc);
        }
        md->kind = TOK_MODEL_UNIGRAM;
        md->nvocab = (int32_t)n;
        md->fuse_unk = true;
        json_t *unk = json_object_get(m, "unk_id");
        if (!json_is_integer(unk) || json_integer_value(unk) < 0 || json_integer_value(unk) >= (json_int_t)n)
            return tr_fail(err, TR_EUSER, "tokenizer: %s: model.unk_id must be an id in the vocabulary (0..%zu); Unigram models without one are not supported", path, n ? n - 1 : 0);
        md->unk_id = (int32_t)json_integer_value(unk);
        if (!tr_tok_vocab_index(&tok->vocab)) return OOM(err);
        return TR_OK;
    }
    return tr_fail(err, TR_EUSER, "tokenizer: %s: model type \"%s\" is not supported (WordPiece, Unigram and BPE are)", path, type);
}

/* ------------------------------------------------------------ post-processor */
static int32_t special_id(tr_tokenizer *tok, const char *s)
{
    return s ? tr_tok_vocab_find(&tok->vocab, s, strlen(s)) : -1;
}

static void tmpl_special(tok_item *it, int32_t id, int32_t type_id)
{
    it->kind = TOK_ITEM_SPECIAL;
    it->type_id = type_id;
    it->ids[0] = id;
    it->nids = 1;
}

static void tmpl_seq(tok_item *it, int kind, int32_t type_id)
{
    it->kind = kind;
    it->type_id = type_id;
    it->nids = 0;
}

static int parse_template(json_t *list, json_t *specials, tok_item *items, int cap, int *nitems,
                          const char *path, tr_error *err)
{
    size_t i;
    json_t *it;
    if (!json_is_array(list) || json_array_size(list) > (size_t)cap)
        return tr_fail(err, TR_EUSER, "tokenizer: %s: a TemplateProcessing template is missing or longer than %d items", path, cap);
    json_array_foreach(list, i, it) {
        json_t *sp = json_object_get(it, "SpecialToken"), *sq = json_object_get(it, "Sequence");
        json_t *o = sp ? sp : sq;
        int32_t type_id = (int32_t)json_integer_value(json_object_get(o, "type_id"));
        const char *id = jstr(o, "id");
        if (!o || !id) return tr_fail(err, TR_EUSER, "tokenizer: %s: a template item is neither {\"SpecialToken\"} nor {\"Sequence\"} with an \"id\"", path);
        if (sq) {
            tmpl_seq(&items[i], strcmp(id, "B") == 0 ? TOK_ITEM_SEQ_B : TOK_ITEM_SEQ_A, type_id);
            continue;
        }
        json_t *ids = json_object_get(json_object_get(specials, id), "ids");
        size_t k;
        json_t *v;
        if (!json_is_array(ids) || json_array_size(ids) == 0 || json_array_size(ids) > 4)
            return tr_fail(err, TR_EUSER, "tokenizer: %s: post_processor.special_tokens[\"%s\"] has no ids (1 to 4)", path, id);
        items[i].kind = TOK_ITEM_SPECIAL;
        items[i].type_id = type_id;
        items[i].nids = (int32_t)json_array_size(ids);
        json_array_foreach(ids, k, v) items[i].ids[k] = (int32_t)json_integer_value(v);
    }
    *nitems = (int)json_array_size(list);
    return TR_OK;
}

/* Sets the template from one post-processor; a Sequence applies each in turn, and of
 * those only one may add tokens (ByteLevel changes offsets alone, which are not kept). */
static int set_post(tr_tokenizer *tok, json_t *o, const char *path, tr_error *err)
{
    tok_template *t = &tok->tmpl;
    if (!o || json_is_null(o)) return TR_OK;
    const char *type = jstr(o, "type");
    if (!type) return tr_fail(err, TR_EUSER, "tokenizer: %s: the post_processor has no \"type\"", path);
    if (strcmp(type, "ByteLevel") == 0) return TR_OK;
    if (strcmp(type, "Sequence") == 0) return add_sequence(tok, o, "processors", "post_processor", set_post, path, err);
    if (t->nsingle > 0)
        return tr_fail(err, TR_EUSER, "tokenizer: %s: a post_processor Sequence with two steps that add tokens is not supported", path);
    if (strcmp(type, "TemplateProcessing") == 0) {
        json_t *sp = json_object_get(o, "special_tokens");
        int rc = parse_template(json_object_get(o, "single"), sp, t->single, 8, &t->nsingle, path, err);
        if (!rc) rc = parse_template(json_object_get(o, "pair"), sp, t->pair, 12, &t->npair, path, err);
        return rc;
    }
    bool bert = strcmp(type, "BertProcessing") == 0, roberta = strcmp(type, "RobertaProcessing") == 0;
    if (!bert && !roberta)
        return tr_fail(err, TR_EUSER, "tokenizer: %s: post_processor type \"%s\" is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and a Sequence of them are)", path, type);
    json_t *cls = json_object_get(o, "cls"), *sep = json_object_get(o, "sep");
    if (!json_is_integer(json_array_get(cls, 1)) || !json_is_integer(json_array_get(sep, 1)))
        return tr_fail(err, TR_EUSER, "tokenizer: %s: %s needs \"cls\" and \"sep\" as [token, id]", path, type);
    int32_t c = (int32_t)json_integer_value(json_array_get(cls, 1));
    int32_t s = (int32_t)json_integer_value(json_array_get(sep, 1));
    tmpl_special(&t->single[0], c, 0);
    tmpl_seq(&t->single[1], TOK_ITEM_SEQ_A, 0);
    tmpl_special(&t->single[2], s, 0);
    t->nsingle = 3;
    int32_t b = bert ? 1 : 0;   /* RoBERTa gives every token type 0 */
    tmpl_special(&t->pair[0], c, 0);
    tmpl_seq(&t->pair[1], TOK_ITEM_SEQ_A, 0);
    tmpl_special(&t->pair[2], s, 0);
    int k = 3;
    if (roberta) tmpl_special(&t->pair[k++], s, 0);
    tmpl_seq(&t->pair[k++], TOK_ITEM_SEQ_B, b);
    tmpl_special(&t->pair[k++], s, b);
    t->npair = k;
    return TR_OK;
}

/* Every id the template adds must be a token (checked once all ids exist). */
static int check_template(const tr_tokenizer *tok, const char *path, tr_error *err)
{
    const tok_item *lists[2] = { tok->tmpl.single, tok->tmpl.pair };
    int counts[2] = { tok->tmpl.nsingle, tok->tmpl.npair };
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < counts[l]; i++)
            for (int j = 0; j < lists[l][i].nids; j++) {
                int32_t id = lists[l][i].ids[j];
                if (id < 0 || id >= tok->vocab.n)
                    return tr_fail(err, TR_EUSER, "tokenizer: %s: the post_processor adds id %d, which is not in the vocabulary (0..%d)", path, id, tok->vocab.n - 1);
            }
    return TR_OK;
}

/* ------------------------------------------------------------ added tokens */
static int add_added(tr_tokenizer *tok, const char *content, int32_t id, bool special, bool lstrip,
                     bool rstrip, bool normalized, tr_error *err)
{
    tok_added *a = realloc(tok->added, (size_t)(tok->nadded + 1) * sizeof *a);
    if (!a) return OOM(err);
    tok->added = a;
    a = &tok->added[tok->nadded];
    memset(a, 0, sizeof *a);
    /* tokenizers matches a normalized=true token by its normalized form */
    tok_buf match = { 0 };
    if (normalized ? !tr_tok_normalize(tok->norm, tok->nnorm, content, strlen(content), &match)
                   : !tr_tok_buf_put(&match, content, strlen(content))) {
        tr_tok_buf_free(&match);
        return OOM(err);
    }
    a->content = match.p;
    a->len = match.n;
    tok->nadded++;
    a->id = id;
    a->special = special;
    a->lstrip = lstrip;
    a->rstrip = rstrip;
    a->normalized = normalized;
    if (normalized) tok->has_normalized_added = true;
    if (id >= tok->vocab.n || !tok->vocab.str[id]) {
        if (!tr_tok_vocab_set(&tok->vocab, id, content, strlen(content))) return OOM(err);
    }
    return TR_OK;
}

/* Sets pad/cls/sep/unk/mask from tokenizer_config.json names, else the usual names. */
static void set_special_ids(tr_tokenizer *tok, json_t *cfg)
{
    static const char *const names[5][3] = {
        { "pad_token", "[PAD]", "<pad>" }, { "cls_token", "[CLS]", "<s>" },
        { "sep_token", "[SEP]", "</s>" }, { "unk_token", "[UNK]", "<unk>" },
        { "mask_token", "[MASK]", "<mask>" },
    };
    int32_t *dst[5] = { &tok->pad_id, &tok->cls_id, &tok->sep_id, &tok->unk_id, &tok->mask_id };
    for (int i = 0; i < 5; i++) {
        int32_t id = special_id(tok, token_name(cfg, names[i][0]));
        if (id < 0) id = special_id(tok, names[i][1]);
        if (id < 0) id = special_id(tok, names[i][2]);
        *dst[i] = id;
    }
    if (tok->unk_id < 0) tok->unk_id = tok->model.unk_id;
}

/* tokenizer_config.json next to path, or NULL (absent or unreadable: defaults apply). */
static json_t *load_config(const char *path, char *cfg_path, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    snprintf(cfg_path, cap, "%.*stokenizer_config.json", (int)dirlen, path);
    return json_load_file(cfg_path, 0, NULL);
}

static void set_max_length(tr_tokenizer *tok, json_t *cfg, json_t *root)
{
    json_t *m = json_object_get(cfg, "model_max_length");
    if (json_is_number(m) && json_number_value(m) > 0 && json_number_value(m) < 1e6) {
        tok->model_max_length = (int32_t)json_number_value(m);
        return;
    }
    m = json_object_get(json_object_get(root, "truncation"), "max_length");
    if (json_is_integer(m) && json_integer_value(m) > 0 && json_integer_value(m) < 1000000)
        tok->model_max_length = (int32_t)json_integer_value(m);
}

/* ------------------------------------------------------------ tokenizer.json */
int tr_tok_load_json(tr_tokenizer *tok, const char *path, tr_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return tr_fail(err, TR_EUSER, "tokenizer: %s: not valid JSON (line %d, column %d: %s); the file may be truncated: download it again", path, je.line, je.column, je.text);
    char cfg_path[4096];
    json_t *cfg = load_config(path, cfg_path, sizeof cfg_path);
    int rc = TR_OK;
    if (!json_is_object(root)) {
        rc = tr_fail(err, TR_EUSER, "tokenizer: %s: the top level is not an object", path);
        goto done;
    }
    if ((rc = set_model(tok, json_object_get(root, "model"), path, err))) goto done;
    if ((rc = add_norm(tok, json_object_get(root, "normalizer"), path, err))) goto done;
    apply_config_overrides(tok, cfg, false);
    if ((rc = add_pretok(tok, json_object_get(root, "pre_tokenizer"), path, err))) goto done;
    if ((rc = set_post(tok, json_object_get(root, "post_processor"), path, err))) goto done;
    json_t *added = json_object_get(root, "added_tokens"), *it;
    size_t i;
    json_array_foreach(added, i, it) {
        const char *content = jstr(it, "content");
        json_t *id = json_object_get(it, "id");
        json_int_t limit = (json_int_t)tok->model.nvocab + (json_int_t)json_array_size(added);
        if (!content || !json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= limit) {
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s: added_tokens[%zu] needs \"content\" and an \"id\" in 0..%lld", path, i, (long long)limit - 1);
            goto done;
        }
        if (jbool(it, "single_word", false)) {
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s: added_tokens[%zu] (\"%s\") has single_word=true, which is not supported", path, i, content);
            goto done;
        }
        rc = add_added(tok, content, (int32_t)json_integer_value(id), jbool(it, "special", false),
                       jbool(it, "lstrip", false), jbool(it, "rstrip", false),
                       jbool(it, "normalized", !jbool(it, "special", false)), err);
        if (rc) goto done;
    }
    if (!tr_tok_vocab_index(&tok->vocab)) { rc = OOM(err); goto done; }
    for (int32_t k = 0; k < tok->vocab.n; k++)
        if (!tok->vocab.str[k]) {
            rc = tr_fail(err, TR_EUSER, "tokenizer: %s: no token has id %d (added_tokens leave a gap after the model's %d ids)", path, k, tok->model.nvocab);
            goto done;
        }
    if ((rc = check_template(tok, path, err))) goto done;
    set_special_ids(tok, cfg);
    set_max_length(tok, cfg, root);
done:
    json_decref(cfg);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------ vocab.txt */
int tr_tok_load_vocab_txt(tr_tokenizer *tok, const char *path, tr_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tr_fail(err, TR_EUSER, "tokenizer: %s: cannot open (%s); a model folder needs tokenizer.json or vocab.txt", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int32_t id = 0;
    int rc = TR_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') len--;
        if (!tr_tok_vocab_set(&tok->vocab, id++, line, (size_t)len)) { rc = OOM(err); break; }
    }
    free(line);
    fclose(f);
    if (rc) return rc;
    if (id == 0) return tr_fail(err, TR_EUSER, "tokenizer: %s: the vocabulary is empty", path);
    if (!tr_tok_vocab_index(&tok->vocab)) return OOM(err);
    char cfg_path[4096];
    json_t *cfg = load_config(path, cfg_path, sizeof cfg_path);
    tok_model *md = &tok->model;
    md->kind = TOK_MODEL_WORDPIECE;
    md->nvocab = id;
    strcpy(md->prefix, "##");
    md->max_chars = 100;
    const char *unk = token_name(cfg, "unk_token");
    if (!unk) unk = "[UNK]";
    md->unk_id = special_id(tok, unk);
    if (md->unk_id < 0) {
        json_decref(cfg);
        return tr_fail(err, TR_EUSER, "tokenizer: %s: the unknown token \"%s\" is not in the vocabulary", path, unk);
    }
    tok_norm *nm = &tok->norm[0];
    memset(nm, 0, sizeof *nm);
    nm->kind = TOK_NORM_BERT;
    nm->clean_text = true;
    tok->nnorm = 1;
    apply_config_overrides(tok, cfg, true);
    tok->pretok[0].kind = TOK_PRE_BERT;
    tok->npretok = 1;
    set_special_ids(tok, cfg);
    set_max_length(tok, cfg, NULL);
    if (tok->cls_id < 0 || tok->sep_id < 0) {
        json_decref(cfg);
        return tr_fail(err, TR_EUSER, "tokenizer: %s: the vocabulary has no [CLS]/[SEP] (or tokenizer_config.json's cls_token/sep_token)", path);
    }
    tok_template *t = &tok->tmpl;
    tmpl_special(&t->single[0], tok->cls_id, 0);
    tmpl_seq(&t->single[1], TOK_ITEM_SEQ_A, 0);
    tmpl_special(&t->single[2], tok->sep_id, 0);
    t->nsingle = 3;
    tmpl_special(&t->pair[0], tok->cls_id, 0);
    tmpl_seq(&t->pair[1], TOK_ITEM_SEQ_A, 0);
    tmpl_special(&t->pair[2], tok->sep_id, 0);
    tmpl_seq(&t->pair[3], TOK_ITEM_SEQ_B, 1);
    tmpl_special(&t->pair[4], tok->sep_id, 1);
    t->npair = 5;
    int32_t specials[5] = { tok->pad_id, tok->unk_id, tok->cls_id, tok->sep_id, tok->mask_id };
    for (int i = 0; i < 5 && !rc; i++)
        if (specials[i] >= 0)
            rc = add_added(tok, tok->vocab.str[specials[i]], specials[i], true, false, false, false, err);
    json_decref(cfg);
    return rc;
}
