/* test_tokenizer.c — the tokenizer against golden ids from Hugging Face `tokenizers`
 * (tests/ref/make_tokenizer_golden.py): all-MiniLM-L6-v2 (WordPiece, uncased), a small
 * Unigram + Precompiled + Metaspace tokenizer in XLM-R's layout, an uncased WordPiece that
 * keeps accents (from tokenizer.json, and from tokenizer_config.json overriding it), and a
 * vocab.txt-only folder; then batches (padding, masks), truncation and bad files. */
#include "check.h"
#include "tok_golden.h"
#include "trainer.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ golden files */
static const char *minilm_dir(void)
{
    struct stat st;
    return stat("models/all-MiniLM-L6-v2/tokenizer.json", &st) == 0 ? "models/all-MiniLM-L6-v2"
                                                                     : "tests/data/tok_minilm";
}

static void test_minilm_golden(void)
{
    int n = tg_check(minilm_dir(), "tests/data/tokenizer_golden_minilm.jsonl");
    CHECK(n > 100, "only %d cases", n);
}

static void test_unigram_golden(void) { tg_golden_of("unigram", 100); }
static void test_scandi_golden(void) { tg_golden_of("scandi", 100); }
static void test_scandi_config_override(void) { tg_golden_of("scandi_config", 100); }
static void test_vocab_txt_golden(void) { tg_golden_of("vocab_txt", 100); }
static void test_unigram_variant_golden(void) { tg_golden_of("unigram_variant", 100); }
static void test_wordpiece_variant_golden(void) { tg_golden_of("wordpiece_variant", 100); }

/* ------------------------------------------------------------ behaviour */
static void test_scandi_letters_survive(void)
{
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    CHECK(tr_tok_load(&tok, "tests/data/tok_scandi_config", &err) == TR_OK, "%s", err.msg);
    if (!tok) return;
    const char *letters[] = { "æ", "ø", "å", "ä", "ö" };
    const char *upper[] = { "Æ", "Ø", "Å", "Ä", "Ö" };
    tr_tok_options opt = { 0, 0, 0 };
    for (int i = 0; i < 5; i++) {
        tr_tok_encoding e;
        CHECK(tr_tok_encode(tok, upper[i], NULL, &opt, &e, &err) == TR_OK, "%s", err.msg);
        CHECK(e.n == 1 && strcmp(tr_tok_id_to_token(tok, e.ids[0]), letters[i]) == 0,
              "%s -> %d ids, first \"%s\"", upper[i], e.n, e.n ? tr_tok_id_to_token(tok, e.ids[0]) : "");
        tr_tok_encoding_free(&e);
    }
    tr_tok_free(tok);
}

static void test_batch_padding_and_mask(void)
{
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    CHECK(tr_tok_load(&tok, minilm_dir(), &err) == TR_OK, "%s", err.msg);
    if (!tok) return;
    CHECK(tr_tok_vocab_size(tok) == 30522, "vocab %d", tr_tok_vocab_size(tok));
    CHECK(tr_tok_pad_id(tok) == 0 && tr_tok_unk_id(tok) == 100 && tr_tok_cls_id(tok) == 101 &&
          tr_tok_sep_id(tok) == 102 && tr_tok_mask_id(tok) == 103, "special ids");
    CHECK(strcmp(tr_tok_id_to_token(tok, 101), "[CLS]") == 0, "id 101");
    CHECK(tr_tok_id_to_token(tok, 30522) == NULL && tr_tok_id_to_token(tok, -1) == NULL, "out of range");
    CHECK(tr_tok_token_to_id(tok, "hello") == 7592, "hello -> %d", tr_tok_token_to_id(tok, "hello"));
    CHECK(tr_tok_model_max_length(tok) == 512, "model_max_length %d", tr_tok_model_max_length(tok));
    CHECK(tr_tok_num_special(tok, 0) == 2 && tr_tok_num_special(tok, 1) == 3, "specials");
    const char *a[3] = { "A man is playing a flute.", "Hi", "The quick brown fox jumps over the lazy dog." };
    const char *b[3] = { "A man plays.", NULL, "Dogs sleep." };
    tr_tok_batch bt;
    tr_tok_options opt = { 1, 0, 0 };
    CHECK(tr_tok_encode_batch(tok, a, b, 3, &opt, &bt, &err) == TR_OK, "%s", err.msg);
    int32_t longest = 0;
    for (int i = 0; i < 3; i++) {
        tr_tok_encoding e;
        tr_tok_encode(tok, a[i], b[i], &opt, &e, &err);
        if (e.n > longest) longest = e.n;
        for (int32_t j = 0; j < bt.seq_len; j++) {
            size_t k = (size_t)i * bt.seq_len + j;
            int32_t id = j < e.n ? e.ids[j] : 0, ty = j < e.n ? e.type_ids[j] : 0;
            CHECK(bt.ids[k] == id && bt.type_ids[k] == ty && bt.attention_mask[k] == (j < e.n),
                  "row %d col %d: id %d type %d mask %d", i, j, bt.ids[k], bt.type_ids[k], bt.attention_mask[k]);
        }
        tr_tok_encoding_free(&e);
    }
    CHECK(bt.batch == 3 && bt.seq_len == longest, "shape %d x %d, longest %d", bt.batch, bt.seq_len, longest);
    CHECK(bt.attention_mask[1 * bt.seq_len + 2] == 1 && bt.attention_mask[1 * bt.seq_len + 3] == 0,
          "row 1 is [CLS] hi [SEP]");
    tr_tok_batch_free(&bt);
    /* truncation + fixed padding */
    tr_tok_options fixed = { 1, 8, 10 };
    CHECK(tr_tok_encode_batch(tok, a, b, 3, &fixed, &bt, &err) == TR_OK, "%s", err.msg);
    CHECK(bt.seq_len == 10, "pad_to: %d", bt.seq_len);
    for (int i = 0; i < 3; i++) {
        int32_t real = 0;
        for (int32_t j = 0; j < 10; j++) real += bt.attention_mask[i * 10 + j];
        CHECK(real <= 8, "row %d has %d tokens", i, real);
        CHECK(bt.ids[i * 10 + real - 1] == 102, "row %d ends with [SEP]", i);
    }
    tr_tok_batch_free(&bt);
    /* max_length below the specials is a user error */
    tr_tok_encoding e;
    tr_tok_options tiny = { 1, 2, 0 };
    CHECK(tr_tok_encode(tok, "a", "b", &tiny, &e, &err) == TR_EUSER && strstr(err.msg, "max_length"), "%s", err.msg);
    CHECK(tr_tok_encode(tok, "bad \xC3\x28 utf8", NULL, NULL, &e, &err) == TR_EUSER && strstr(err.msg, "UTF-8"), "%s", err.msg);
    CHECK(e.ids == NULL && e.n == 0, "failed encode leaves no buffers");
    const char *badrow[2] = { "fine", "\xFF" };
    CHECK(tr_tok_encode_batch(tok, badrow, NULL, 2, NULL, &bt, &err) == TR_EUSER && bt.ids == NULL, "%s", err.msg);
    tr_tok_free(tok);
}

/* A batch large enough to run on threads gives the rows single encodes give. */
static void test_big_batch_matches_single(void)
{
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    CHECK(tr_tok_load(&tok, "tests/data/tok_unigram", &err) == TR_OK, "%s", err.msg);
    if (!tok) return;
    enum { B = 300 };
    static char store[B][64];
    const char *texts[B], *pairs[B];
    for (int i = 0; i < B; i++) {
        snprintf(store[i], sizeof store[i], "En man spelar %d flöjter, %s.", i * 7919 % 1000,
                 i % 3 ? "och en katt" : "Jeg elsker æbler");
        texts[i] = store[i];
        pairs[i] = i % 2 ? store[(i * 31) % B] : NULL;
    }
    tr_tok_options opt = { 1, 16, 0 };
    tr_tok_batch bt;
    CHECK(tr_tok_encode_batch(tok, texts, pairs, B, &opt, &bt, &err) == TR_OK, "%s", err.msg);
    CHECK(bt.seq_len == 16, "seq_len %d", bt.seq_len);
    int bad = 0;
    for (int i = 0; i < B && bt.ids; i++) {
        tr_tok_encoding e;
        tr_tok_encode(tok, texts[i], pairs[i], &opt, &e, &err);
        for (int32_t j = 0; j < bt.seq_len; j++) {
            size_t k = (size_t)i * bt.seq_len + j;
            bool real = j < e.n;
            if (bt.ids[k] != (real ? e.ids[j] : tr_tok_pad_id(tok)) || bt.attention_mask[k] != real) bad++;
        }
        tr_tok_encoding_free(&e);
    }
    CHECK(bad == 0, "%d cells differ", bad);
    CHECK(tr_tok_pad_id(tok) == 1, "<pad> is 1 in XLM-R's layout, got %d", tr_tok_pad_id(tok));
    tr_tok_batch_free(&bt);
    tr_tok_free(tok);
}

/* ------------------------------------------------------------ bad files */
static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(text, 1, n, f); fclose(f); }
}

static void expect_user_error(const char *dir, const char *needle)
{
    tr_tokenizer *tok = (tr_tokenizer *)1;
    tr_error err = { 0 };
    int rc = tr_tok_load(&tok, dir, &err);
    CHECK(rc == TR_EUSER && tok == NULL, "%s: rc %d", dir, rc);
    CHECK(strstr(err.msg, needle) != NULL, "message \"%s\" lacks \"%s\"", err.msg, needle);
}

static void test_bad_files(void)
{
    char dir[] = "/tmp/tr_tok_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    expect_user_error(dir, "neither tokenizer.json nor vocab.txt");
    /* truncated: the first 3000 bytes of a real file */
    FILE *f = fopen("tests/data/tok_unigram/tokenizer.json", "rb");
    char buf[3000];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, buf, n);
    expect_user_error(dir, "tokenizer.json: not valid JSON");
    const char *garbled[] = {
        "[1, 2, 3]",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"b\": 5}}}",
        "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0}}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}",
        "{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AAAA!!\"},"
        " \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0]]}}",
        "{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"/////wAA\"},"
        " \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1.0]]}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
        " \"added_tokens\": [{\"id\": 99999999, \"content\": \"x\"}]}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
        " \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": [\"[CLS]\", 7], \"sep\": [\"[SEP]\", 0]}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 0}},"
        " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"content\": \" \"}}",
        /* two tokens of one id: id 1 has none (once read past the vocabulary's end) */
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
    };
    const char *why[] = { "top level", "BPE", "not an id", "[UNK]", "vocab[0]", "base64", "charsmap",
                          "unk_id", "added_tokens[0]", "adds id 7", "regex", "no token with id 1" };
    for (int i = 0; i < 12; i++) {
        write_file(path, garbled[i], strlen(garbled[i]));
        expect_user_error(dir, why[i]);
        expect_user_error(dir, path);
    }
    remove(path);
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    write_file(path, "a\nb\n", 4);
    expect_user_error(dir, "[UNK]");
    remove(path);
    rmdir(dir);
}

int main(void)
{
    RUN(test_minilm_golden);
    RUN(test_unigram_golden);
    RUN(test_scandi_golden);
    RUN(test_scandi_config_override);
    RUN(test_vocab_txt_golden);
    RUN(test_unigram_variant_golden);
    RUN(test_wordpiece_variant_golden);
    RUN(test_scandi_letters_survive);
    RUN(test_batch_padding_and_mask);
    RUN(test_big_batch_matches_single);
    RUN(test_bad_files);
    return check_done();
}
