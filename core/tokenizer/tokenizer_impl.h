/* tokenizer_impl.h — the tokenizer's internal types, shared by the files of core/tokenizer/ and
 * not part of the public API (trainer.h does not include it).
 *
 * Pipeline for one text, as Hugging Face `tokenizers` runs it: split out added tokens
 * that match the raw text -> normalize each remaining segment -> split out added tokens
 * that match normalized text -> pre-tokenize into words (a chain of steps) -> the model
 * (WordPiece, Unigram or BPE) maps each word to ids -> truncate -> post-process (template
 * with specials). Strings are UTF-8 byte ranges; nothing here keeps offsets. */
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
/* The growable array p (*cap elements of elem bytes, n in use) with room for one more: p
 * itself, or its larger copy with *cap updated; NULL on OOM (p and *cap unchanged). */
void *tr_tok_grow(void *p, size_t *cap, size_t n, size_t elem);
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
/* FNV-1a over s[0..n): the vocabulary's hash, and the BPE word cache's. */
uint64_t tr_tok_hash_bytes(const char *s, size_t n);
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
    TOK_PRE_WHITESPACE_SPLIT = 3,
    TOK_PRE_BYTE_LEVEL = 4,   /* GPT-2: prefix space, GPT-2's split, bytes -> printable chars */
    TOK_PRE_GPT2_SPLIT = 5    /* Split with GPT-2's pattern, Isolated: the split alone */
} tok_pretok_kind;

typedef enum tok_prepend { TOK_PREPEND_ALWAYS = 0, TOK_PREPEND_FIRST = 1, TOK_PREPEND_NEVER = 2 } tok_prepend;

typedef struct tok_pretok {
    int kind;
    char replacement[8];     /* METASPACE: UTF-8 of the replacement char */
    int prepend;             /* tok_prepend */
    bool split;              /* METASPACE: split at the marker; BYTE_LEVEL: use_regex */
    bool add_prefix_space;   /* BYTE_LEVEL: a space before a piece that lacks one */
} tok_pretok;

/* A word: byte range into the pre-tokenizer's output buffer. */
typedef struct tok_span { size_t off, len; } tok_span;
typedef struct tok_spans { tok_span *p; size_t n, cap; } tok_spans;
bool tr_tok_spans_push(tok_spans *v, size_t off, size_t len);

/* Words: their bytes (possibly rewritten: Metaspace markers, byte-level chars) and spans. */
typedef struct tok_words { tok_buf text; tok_spans spans; } tok_words;
/* A pre-tokenizer chain's scratch: a step reads one pass and appends to the other. */
typedef struct tok_pre_scratch { tok_words pass[2]; tok_buf raw; } tok_pre_scratch;

/* Splits s[0..n) into words through the nsteps steps in order (each step splits every
 * word of the step before; no step: s is one word). *out points at the pass holding the
 * words, inside sc. first: the segment starts the original text (for Metaspace's
 * prepend_scheme "first"). False on OOM. */
bool tr_tok_pretokenize(const tok_pretok *steps, int nsteps, const char *s, size_t n, bool first,
                        tok_pre_scratch *sc, const tok_words **out);
void tr_tok_pre_scratch_free(tok_pre_scratch *sc);

/* byte_level.c: GPT-2's split pattern as Oniguruma matches it (a Split step) and the
 * ByteLevel step (prefix space, the split, bytes -> chars). Both append to dst; raw is
 * scratch for the prefix space. False on OOM. */
bool tr_tok_gpt2_split(const char *s, size_t n, tok_words *dst);
bool tr_tok_byte_level(const tok_pretok *pt, const char *s, size_t n, tok_buf *raw, tok_words *dst);
/* The class GPT-2's pattern sees in a code point. */
typedef enum tok_gpt2_class {
    TOK_GPT2_SPACE = 0,    /* \s */
    TOK_GPT2_LETTER = 1,   /* \p{L} */
    TOK_GPT2_NUMBER = 2,   /* \p{N} */
    TOK_GPT2_OTHER = 3
} tok_gpt2_class;

/* Unicode helpers with the Rust semantics `tokenizers` relies on. */
bool tr_tok_is_whitespace(int32_t cp);  /* char::is_whitespace */
/* unicode.c (over the generated unicode_tables.h): `tokenizers`' answer where it differs from
 * utf8proc's, else -1: is control (clean_text removes it), is punctuation, is a nonspacing mark,
 * is not decomposed by NFD;
 * the lowercase mapping. */
int tr_tok_hf_control(int32_t cp);
int tr_tok_hf_punct(int32_t cp);
int tr_tok_hf_mn(int32_t cp);
int tr_tok_hf_keep(int32_t cp);          /* 1: NFD leaves it whole in `tokenizers` */
int32_t tr_tok_hf_lower(int32_t cp);
/* Oniguruma's class (tok_gpt2_class) in GPT-2's pattern where it differs from utf8proc's
 * general category, else -1. */
int tr_tok_hf_gpt2_class(int32_t cp);

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
typedef enum tok_model_kind { TOK_MODEL_WORDPIECE = 0, TOK_MODEL_UNIGRAM = 1, TOK_MODEL_BPE = 2 } tok_model_kind;

typedef struct tok_bpe tok_bpe;     /* BPE merges, char ids and word cache (bpe.c) */

typedef struct tok_model {
    int kind;
    int32_t unk_id;                 /* -1 when none */
    int32_t nvocab;                 /* ids the model itself owns: 0..nvocab-1 */
    char prefix[16];                /* continuing-subword prefix: WordPiece "##", BPE often "" */
    char suffix[16];                /* BPE end_of_word_suffix, often "" */
    int32_t max_chars;              /* WordPiece max_input_chars_per_word */
    double min_score;               /* Unigram: lowest piece score */
    bool fuse_unk;                  /* Unigram, BPE: consecutive unknowns become one unk */
    bool byte_fallback;             /* BPE: an unknown char becomes its <0xXX> byte tokens */
    bool ignore_merges;             /* BPE: a word in the vocabulary is its own id */
    tok_bpe *bpe;                   /* BPE only; owned */
} tok_model;

/* Appends the ids of one pre-tokenized word; false on OOM. */
bool tr_tok_wordpiece(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_ids *out);
bool tr_tok_unigram(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_ids *out);

/* ------------------------------------------------------------ BPE */
/* One word's symbols (a doubly linked list in an array) and the heap of candidate merges;
 * scratch reused across words by one encoding thread. */
typedef struct tok_bpe_sym { int32_t id, prev, next, len; } tok_bpe_sym;
typedef struct tok_bpe_cand { int32_t rank, pos, id; } tok_bpe_cand;
typedef struct tok_bpe_work {
    tok_bpe_sym *sym;
    tok_bpe_cand *heap;
    size_t nsym, capsym, nheap, capheap;
    tok_buf piece;                  /* a char with the prefix / suffix around it */
} tok_bpe_work;
void tr_tok_bpe_work_free(tok_bpe_work *w);

/* bpe.c: merges are added in rank order after the vocabulary is complete; a pair given
 * twice keeps the later rank (as `tokenizers` does). NULL / false on OOM. */
tok_bpe *tr_tok_bpe_new(size_t nmerges);
bool tr_tok_bpe_add_merge(tok_bpe *b, int32_t left, int32_t right, int32_t rank, int32_t merged);
/* Builds the per-char and per-byte id tables once the model fields are set; false on OOM. */
bool tr_tok_bpe_finish(tok_bpe *b, const tok_model *m, const tok_vocab *v);
void tr_tok_bpe_free(tok_bpe *b);
/* The id of s[0..n) in the model's own vocabulary (not an added token's), or -1. */
int32_t tr_tok_model_id(const tok_model *m, const tok_vocab *v, const char *s, size_t n);
bool tr_tok_bpe(const tok_model *m, const tok_vocab *v, const char *w, size_t n, tok_bpe_work *work,
                tok_ids *out);

/* bpe_cache.c: word -> ids, shared by every thread that encodes with one tokenizer; a
 * shard another thread holds is passed over (a miss), never waited for; a full slot is
 * replaced. Only words of at most TOK_BPE_CACHE_WORD bytes. */
enum { TOK_BPE_CACHE_WORD = 64 };
typedef struct tok_bpe_cache tok_bpe_cache;
tok_bpe_cache *tr_tok_bpe_cache_new(void);
/* Appends w's ids to out: 1 when cached, 0 when not (out unchanged), -1 on OOM. */
int tr_tok_bpe_cache_get(tok_bpe_cache *c, const char *w, size_t n, tok_ids *out);
/* Remembers w's ids (nothing happens when w is too long or memory is short). */
void tr_tok_bpe_cache_put(tok_bpe_cache *c, const char *w, size_t n, const int32_t *ids, size_t nids);
void tr_tok_bpe_cache_free(tok_bpe_cache *c);

/* bpe_load.c: model.type "BPE" of tokenizer.json (fills tok->vocab and tok->model). */
struct json_t;
int tr_tok_load_bpe(tr_tokenizer *tok, struct json_t *model, const char *path, tr_error *err);
/* vocab.c: a model.vocab object {token: id} with ids dense from 0 into tok->vocab; the
 * count in *n. */
int tr_tok_load_vocab_object(tr_tokenizer *tok, struct json_t *vocab, const char *path, int32_t *n,
                             tr_error *err);

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
    tok_pretok pretok[4];     /* applied in order */
    int npretok;
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
