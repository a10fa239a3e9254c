/* fuzz_tokenizer.c — libFuzzer target: any bytes as a model folder's tokenizer.json
 * (built as fuzz_tokenizer_json) or vocab.txt (fuzz_vocab_txt, -DFUZZ_VOCAB_TXT). Loading
 * either succeeds, and then texts, a pair and a batch encode without a sanitizer report
 * and with ids inside the vocabulary, or fails with TR_EUSER (or TR_EOOM) and a message. */
#include "fuzz.h"
#include "tokenizer.h"

#ifdef FUZZ_VOCAB_TXT
#define FUZZ_FILE "vocab.txt"
#else
#define FUZZ_FILE "tokenizer.json"
#endif

static const char *texts[] = {
    "Hello, world! The cat sat on the mat.",
    "  héllo  WORLD\t\u00e9t\u00e9 ma\u00f1ana \u65e5\u672c\u8a9e \U0001F600 don't 123.45 ",
    "",
    "a",
    "[CLS] [SEP] [UNK] <s> </s> <unk> <pad> [MASK] <mask>",
};

static void encode_all(const tr_tokenizer *tok)
{
    tr_error err;
    tr_tok_options opt = { 1, 16, 0 };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        tr_tok_encoding enc = { 0 };
        tr_error_clear(&err);
        int rc = tr_tok_encode(tok, texts[i], i % 2 ? texts[0] : NULL, i % 3 ? &opt : NULL, &enc, &err);
        if (rc == TR_OK) {
            for (int32_t k = 0; k < enc.n; k++) {
                if (enc.ids[k] < 0) FUZZ_FAIL("negative id %d", enc.ids[k]);
                (void)tr_tok_id_to_token(tok, enc.ids[k]);
            }
            tr_tok_encoding_free(&enc);
        } else if (rc != TR_EUSER && rc != TR_EOOM) {
            FUZZ_FAIL("encode: status %d: %s", rc, err.msg);
        }
    }
    tr_tok_batch b = { 0 };
    tr_error_clear(&err);
    if (tr_tok_encode_batch(tok, texts, NULL, 3, NULL, &b, &err) == TR_OK) tr_tok_batch_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(FUZZ_FILE, data, size);
    tr_error err;
    tr_error_clear(&err);
    tr_tokenizer *tok = NULL;
    int rc = tr_tok_load(&tok, fuzz_dir(), &err);
    if (rc != TR_OK) {
        if (rc != TR_EUSER && rc != TR_EOOM) FUZZ_FAIL("status %d: %s", rc, err.msg);
        if (tok) FUZZ_FAIL("tokenizer set on failure");
        if (!err.msg[0]) FUZZ_FAIL("empty message");
        return 0;
    }
    encode_all(tok);
    tr_tok_free(tok);
    return 0;
}
