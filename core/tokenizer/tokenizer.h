/* tokenizer.h — Hugging Face compatible tokenizers: a model folder's tokenizer.json
 * (WordPiece with BertNormalizer + BertPreTokenizer; Unigram with Precompiled + Metaspace
 * as XLM-R uses; byte-level BPE as RoBERTa, GPT-2 and ModernBERT use, and BPE with byte
 * fallback), else vocab.txt + tokenizer_config.json. Token ids are those the Hugging Face
 * `tokenizers` library gives for the same files and options.
 *
 * Contract: a loaded tr_tokenizer is immutable but for the BPE word cache, whose shards a
 * thread uses only while it holds them, so encoding is thread-safe; every buffer the
 * library hands out is freed by the matching *_free function. Texts are NUL-terminated UTF-8 (invalid UTF-8 is TR_EUSER).
 * Ids and indices are 0-based. */
#ifndef TR_TOKENIZER_H
#define TR_TOKENIZER_H

#include "tr_base.h"

typedef struct tr_tokenizer tr_tokenizer;

/* Encoding options. A NULL options pointer means {1, 0, 0}. */
typedef struct tr_tok_options {
    int32_t add_special_tokens;  /* 1: wrap with the post-processor's template ([CLS] A [SEP]) */
    int32_t max_length;          /* > 0: truncate (longest first) to this many ids, specials included; 0: no limit */
    int32_t pad_to;              /* batches: > 0 pads every row to this length (after truncation); 0: to the longest row */
} tr_tok_options;

/* One encoded text or pair; ids, type_ids are n entries each, malloc'd by the library. */
typedef struct tr_tok_encoding {
    int32_t *ids;
    int32_t *type_ids;
    int32_t n;
} tr_tok_encoding;

/* A padded batch: three row-major [batch, seq_len] int32 arrays. Padding is on the right
 * with the pad id, type id 0 and attention mask 0; real tokens have mask 1. */
typedef struct tr_tok_batch {
    int32_t *ids;
    int32_t *type_ids;
    int32_t *attention_mask;
    int32_t batch;
    int32_t seq_len;
} tr_tok_batch;

/* Loads dir/tokenizer.json (plus dir/tokenizer_config.json's do_lower_case, strip_accents
 * and tokenize_chinese_chars over a BertNormalizer, as transformers' BertTokenizerFast
 * does), else dir/vocab.txt + dir/tokenizer_config.json. On failure *out is NULL and err
 * names the file and the problem (TR_EUSER), or TR_EOOM. */
int tr_tok_load(tr_tokenizer **out, const char *dir, tr_error *err);
void tr_tok_free(tr_tokenizer *tok);

/* Encodes text, or the pair (text, pair) when pair is non-NULL. On failure out is
 * zeroed. */
int tr_tok_encode(const tr_tokenizer *tok, const char *text, const char *pair,
                  const tr_tok_options *opt, tr_tok_encoding *out, tr_error *err);
void tr_tok_encoding_free(tr_tok_encoding *enc);

/* Encodes batch texts (pairs when pairs is non-NULL; a NULL entry there means no pair for
 * that row), truncates each row, pads to a rectangle. Rows are encoded in parallel. */
int tr_tok_encode_batch(const tr_tokenizer *tok, const char *const *texts,
                        const char *const *pairs, int32_t batch, const tr_tok_options *opt,
                        tr_tok_batch *out, tr_error *err);
void tr_tok_batch_free(tr_tok_batch *b);

/* The number of ids (model vocabulary and added tokens). */
int32_t tr_tok_vocab_size(const tr_tokenizer *tok);
/* The token string of an id; NULL when out of range. Owned by the tokenizer. */
const char *tr_tok_id_to_token(const tr_tokenizer *tok, int32_t id);
/* The id of an exact token string; -1 when absent. */
int32_t tr_tok_token_to_id(const tr_tokenizer *tok, const char *token);
/* Special ids, -1 where the tokenizer has none ([PAD]/<pad>, [CLS]/<s>, [SEP]/</s>,
 * [UNK]/<unk>, [MASK]/<mask>). */
int32_t tr_tok_pad_id(const tr_tokenizer *tok);
int32_t tr_tok_cls_id(const tr_tokenizer *tok);
int32_t tr_tok_sep_id(const tr_tokenizer *tok);
int32_t tr_tok_unk_id(const tr_tokenizer *tok);
int32_t tr_tok_mask_id(const tr_tokenizer *tok);
/* The folder's own length limit: tokenizer_config.json's model_max_length (what
 * transformers uses; ignored when >= 1e6, its "no limit" placeholder), else
 * tokenizer.json's truncation.max_length, else 0. Encoding never applies it by itself:
 * pass it as max_length. (sentence-transformers' max_seq_length lives in
 * sentence_bert_config.json, which the model loader reads.) */
int32_t tr_tok_model_max_length(const tr_tokenizer *tok);
/* The number of ids the post-processor adds to one text (pair = 0) or a pair (pair = 1). */
int32_t tr_tok_num_special(const tr_tokenizer *tok, int32_t pair);

#endif
