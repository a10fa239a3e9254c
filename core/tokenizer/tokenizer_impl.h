/* tokenizer_impl.h — the tokenizer's internal types, shared by the files of core/tokenizer/ and
 * not part of the public API (trainer.h does not include it).
 *
 * Pipeline for one text, as Hugging Face `tokenizers` runs it: split out added tokens
 * that match the raw text -> normalize each remaining segment -> split out added tokens
 * that match normalized text -> pre-tokenize into words -> the model (WordPiece or
 * Unigram) maps each word to ids -> truncate -> post-process (template with specials).
 * Strings are UTF-8 byte ranges; nothing here keeps offsets. */
#ifndef TR_TOKENIZER_IMPL_H
#define TR_TOKENIZER_IMPL_H

#include "tokenizer.h"

#include <stdbool.h>

/* ------------------------------------------------------------ growable buffers */
typedef struct tok_buf { char *p; size_t n, cap; } tok_buf;
typedef struct tok_ids { int32_t *p; size_t n, cap; } tok_ids;

bool tr_tok_buf_reserve(tok_buf *b, size_t extra);
bool tr_tok_buf_put(tok_buf *b, const char *s, size_t n);
bool tr_tok_buf_put_cp(tok_buf *b, int32_t cp);       /* appends one code point as UTF-8 */
bool tr_tok_ids_push(tok_ids *v, int32_t id);
void tr_tok_buf_free(tok_buf *b);
void tr_tok_ids_free(tok_ids *v);

/* Decodes one code point at s[0..n); returns its byte length (>0), or -1 if invalid. */
int tr_tok_utf8_next(const char *s, size_t n, int32_t *cp);

/* ------------------------------------------------------------ vocabulary */
/* Token string <-> id. Strings are owned by the vocab; ids are dense 0..n-1 (a hole in a
 * tokenizer.json id range is an error at load). */
typedef struct tok_vocab {
    char **str;          /* [n] NUL-terminated */
    uint32_t *len;       /* [n] byte lengths */
    float *score;        /* [n] Unigram log-probabilities, NULL otherwise */
    int32_t *slot;       /* open addressing: id or -1; cap is a power of two */
    size_t cap;
    int32_t n;
    uint32_t max_len;    /* longest token in bytes */
} tok_vocab;

/* Sets the string of id (growing the table); false on OOM. */
bool tr_tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n);
/* Builds the hash index once all strings are set; false on OOM. A string set under two
 * ids is found under the lower one. */
bool tr_tok_vocab_index(tok_vocab *v);
int32_t tr_tok_vocab_find(const tok_vocab *v, const char *s, size_t n);
void tr_tok_vocab_free(tok_vocab *v);

/* ------------------------------------------------------------ normalizers */
typedef enum tok_norm_kind {
    TOK_NORM_BERT = 0,
    TOK_NORM_PRECOMPILED = 1,
    TOK_NORM_STRIP = 2,
    TOK_NORM_REPLACE = 3,         /* literal pattern -> content */
    TOK_NORM_REPLACE_SPACES = 4,  /* the regex " {2,}" -> content */
    TOK_NORM_LOWERCASE = 5,
    TOK_NORM_NFD = 6,
    TOK_NORM_NFKD = 7,
    TOK_NORM_NFC = 8,
    TOK_NORM_NFKC = 9,
    TOK_NORM_STRIP_ACCENTS = 10
} tok_norm_kind;

typedef struct tok_norm {
    int kind;
    bool clean_text, chinese, strip_accents, lowercase;  /* BERT (strip_accents resolved) */
    bool left, right;                                    /* STRIP */
    char *pattern, *content;                             /* REPLACE */
    uint8_t *charsmap;                                   /* PRECOMPILED: decoded blob */
    size_t charsmap_len;
    const uint32_t *trie;                                /* into charsmap */
    size_t trie_units;
    const char *normalized;                              /* into charsmap */
    size_t normalized_len;
} tok_norm;

/* out = the normalization of s[0..n) through every step; false on OOM. */
bool tr_tok_normalize(const tok_norm *steps, int nsteps, const char *s, size_t n, tok_buf *out);
/* Parses a Precompiled charsmap blob (already base64-decoded, owned by nm). */
bool tr_tok_precompiled_init(tok_norm *nm);

/* ------------------------------------------------------------ pre-tokenizers */
typedef enum tok_pretok_kind {
    TOK_PRE_NONE = 0,
    TOK_PRE_BERT = 1,
    TOK_PRE_METASPACE = 2,
    TOK_PRE_WHITESPACE_SPLIT = 3
} tok_pretok_kind;

typedef enum tok_prepend { TOK_PREPEND_ALWAYS = 0, TOK_PREPEND_FIRST = 1, TOK_PREPEND_NEVER = 2 } tok_prepend;

typedef struct tok_pretok {
    int kind;
    char replacement[8];     /* METASPACE: UTF-8 of the replacement char */
    int prepend;             /* tok_prepend */
    bool split;
} tok_pretok;

/* A word: byte range into the pre-tokenizer's output buffer. */
typedef struct tok_span { size_t off, len; } tok_span;
typedef struct tok_spans { tok_span *p; size_t n, cap; } tok_spans;
bool tr_tok_spans_push(tok_spans *v, size_t off, size_t len);

/* Splits s[0..n) into words; the words index into *work (which may hold a rewritten copy
 * of s, e.g. spaces replaced by the Metaspace character). first: the segment starts the
 * original text (for prepend_scheme "first"). False on OOM. */
bool tr_tok_pretokenize(const tok_pretok *pt, const char *s, size_t n, bool first, tok_buf *work,
                     tok_spans *words);

/* Unicode helpers with the Rust semantics `tokenizers` relies on. */
bool tr_tok_is_whitespace(int32_t cp);  /* char::is_whitespace */
/* tokenizer_unicode.c (generated): `tokenizers`' answer where it differs from utf8proc's,
 * else -1: is control (clean_text removes it), is punctuation, is a nonspacing mark,
 * is not decomposed by NFD;
 * the lowercase mapping. */
int tr_tok_hf_control(int32_t cp);
int tr_tok_hf_punct(int32_t cp);
int tr_tok_hf_mn(int32_t cp);
int tr_tok_hf_keep(int32_t cp);          /* 1: NFD leaves it whole in `tokenizers` */
int32_t tr_tok_hf_lower(int32_t cp);

/* ------------------------------------------------------------ added tokens */
typedef struct tok_added {
    char *content;       /* what is matched: the normalized form when normalized */
    size_t len;
    int32_t id;
    bool special, lstrip, rstrip, normalized;
} tok_added;

/* A piece of text after added-token splitting: either an added token's id or a range. */
typedef struct tok_piece { size_t off, len; int32_t added_id; /* -1 for text */ } tok_piece;
typedef struct tok_pieces { tok_piece *p; size_t n, cap; } tok_pieces;

/* Splits s[0..n) on the added tokens whose normalized flag equals `normalized`,
 * leftmost-longest, honouring lstrip/rstrip; empty text pieces are dropped. */
bool tr_tok_split_added(const tok_added *added, int nadded, bool normalized, const char *s,
                     size_t n, tok_pieces *out);

/* ------------------------------------------------------------ models */
typedef enum tok_model_kind { TOK_MODEL_WORDPIECE = 0, TOK_MODEL_UNIGRAM = 1 } tok_model_kind;

typedef struct tok_model {
    int kind;
    int32_t unk_id;                 /* -1 when none */
    int32_t nvocab;                 /* ids the model itself owns: 0..nvocab-1 */
    char prefix[16];                /* WordPiece continuing-subword prefix, "##" */
    int32_t max_chars;              /* WordPiece max_input_chars_per_word */
    double min_score;               /* Unigram: lowest piece score */
    bool fuse_unk;                  /* Unigram: consecutive unknowns become one unk */
} tok_model;

/* Appends the ids of one pre-tokenized word; false on OOM. */
bool tr_tok_wordpiece(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_ids *out);
bool tr_tok_unigram(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_ids *out);

/* ------------------------------------------------------------ post-processor */
typedef enum tok_item_kind { TOK_ITEM_SPECIAL = 0, TOK_ITEM_SEQ_A = 1, TOK_ITEM_SEQ_B = 2 } tok_item_kind;

typedef struct tok_item {
    int kind;
    int32_t type_id;
    int32_t ids[4];      /* SPECIAL: the ids it expands to */
    int32_t nids;
} tok_item;

typedef struct tok_template {
    tok_item single[8], pair[12];
    int nsingle, npair;
} tok_template;

/* ------------------------------------------------------------ the tokenizer */
struct tr_tokenizer {
    tok_vocab vocab;          /* model vocabulary + added tokens (ids beyond the model's) */
    tok_model model;
    tok_norm norm[8];
    int nnorm;
    tok_pretok pretok;
    tok_added *added;
    int nadded;
    bool has_normalized_added;
    tok_template tmpl;        /* nsingle == 0: no post-processor */
    int32_t pad_id, cls_id, sep_id, unk_id, mask_id;
    int32_t model_max_length;  /* 0 when the folder states none */
};

/* Loading (tokenizer_load.c) fills a zeroed tokenizer; tokenizer_encode.c frees it. */
int tr_tok_load_json(tr_tokenizer *tok, const char *path, tr_error *err);
int tr_tok_load_vocab_txt(tr_tokenizer *tok, const char *path, tr_error *err);
void tr_tok_release(tr_tokenizer *tok);

#endif
