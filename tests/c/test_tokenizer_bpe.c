/* test_tokenizer_bpe.c — BPE tokenizers against golden ids from Hugging Face `tokenizers`
 * (tests/ref/make_bpe_golden.py): RoBERTa's byte-level layout, ModernBERT's (NFC, template,
 * added runs of spaces), and variants for ignore_merges, a Split + ByteLevel Sequence,
 * continuing-subword prefix and end-of-word suffix with unk, byte fallback with fused unk;
 * then what goldens cannot show: byte-level tokens spell the input's bytes back, the word
 * cache gives the ids a cold tokenizer gives (across threads and evictions), invalid UTF-8,
 * and refused files. */
#include "check.h"
#include "file_check.h"
#include "tok_golden.h"
#include "trainer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ goldens */
static void test_roberta_golden(void) { tg_golden_of("roberta", 90); }
static void test_modernbert_golden(void) { tg_golden_of("modernbert", 90); }
static void test_split_sequence_golden(void) { tg_golden_of("bpe_split", 60); }
static void test_prefix_suffix_unk_golden(void) { tg_golden_of("bpe_suffix", 60); }
static void test_byte_fallback_golden(void) { tg_golden_of("bpe_fallback", 60); }

static tr_tokenizer *load(const char *dir)
{
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    CHECK(tr_tok_load(&tok, dir, &err) == TR_OK, "%s: %s", dir, err.msg);
    return tok;
}

/* The folders' special ids, lengths and template sizes, as transformers reads them. */
static void test_special_ids(void)
{
    tr_tokenizer *r = load("tests/data/tok_roberta"), *m = load("tests/data/tok_modernbert");
    if (!r || !m) { tr_tok_free(r); tr_tok_free(m); return; }
    CHECK(tr_tok_cls_id(r) == 0 && tr_tok_pad_id(r) == 1 && tr_tok_sep_id(r) == 2 && tr_tok_unk_id(r) == 3,
          "roberta cls %d pad %d sep %d unk %d", tr_tok_cls_id(r), tr_tok_pad_id(r), tr_tok_sep_id(r), tr_tok_unk_id(r));
    CHECK(tr_tok_mask_id(r) == tr_tok_vocab_size(r) - 1, "<mask> is the last id, got %d", tr_tok_mask_id(r));
    CHECK(tr_tok_model_max_length(r) == 512 && tr_tok_model_max_length(m) == 8192, "max lengths %d %d",
          tr_tok_model_max_length(r), tr_tok_model_max_length(m));
    CHECK(tr_tok_num_special(r, 0) == 2 && tr_tok_num_special(r, 1) == 4, "roberta adds 2 and 4");
    CHECK(tr_tok_num_special(m, 0) == 2 && tr_tok_num_special(m, 1) == 3, "modernbert adds 2 and 3");
    CHECK(strcmp(tr_tok_id_to_token(m, tr_tok_cls_id(m)), "[CLS]") == 0 &&
          strcmp(tr_tok_id_to_token(m, tr_tok_pad_id(m)), "[PAD]") == 0, "modernbert names");
    CHECK(tr_tok_token_to_id(r, "\xC4\xA0") >= 0, "byte-level space 'G' with a dot is a token");
    tr_tok_free(r);
    tr_tok_free(m);
}

/* ------------------------------------------------------------ byte-level round trip */
/* GPT-2's bytes_to_unicode, written as its Python is: an independent check of byte_level.c. */
static void gpt2_chars(int32_t byte_of[512])
{
    int printable[256] = { 0 }, n = 0;
    for (int i = 0; i < 512; i++) byte_of[i] = -1;
    for (int b = '!'; b <= '~'; b++) printable[b] = 1;
    for (int b = 0xA1; b <= 0xAC; b++) printable[b] = 1;
    for (int b = 0xAE; b <= 0xFF; b++) printable[b] = 1;
    for (int b = 0; b < 256; b++) {
        if (printable[b]) byte_of[b] = b;
        else byte_of[256 + n++] = b;
    }
}

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Random texts of every kind of code point: RoBERTa's tokens, read back through GPT-2's
 * table, spell exactly the text's bytes (no byte lost, none invented, order kept). */
static void test_byte_level_round_trip(void)
{
    tr_tokenizer *tok = load("tests/data/tok_roberta");
    if (!tok) return;
    int32_t byte_of[512];
    gpt2_chars(byte_of);
    static const uint32_t pool[] = { ' ', ' ', '\t', '\n', 'a', 'Z', '7', '\'', 's', '!', 0xE5, 0xF8, 0xC6,
                                     0xAD, 0xA0, 0x85, 0x301, 0x3000, 0x200D, 0x4E2D, 0x1F600, 0x1F3FD,
                                     0x10FFFF, 0x7F, 0x1, 0x661, 0x2167, 0xFE0F };
    uint64_t rng = 12345;
    int bad = 0;
    for (int t = 0; t < 400; t++) {
        char text[512], back[1024];
        size_t n = 0, m = 0;
        int len = 1 + (int)(t % 40);
        for (int i = 0; i < len; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            n += put_utf8(text + n, pool[(rng >> 33) % (sizeof pool / sizeof pool[0])]);
        }
        text[n] = '\0';
        tr_tok_encoding e;
        tr_error err = { 0 };
        tr_tok_options opt = { 0, 0, 0 };
        CHECK(tr_tok_encode(tok, text, NULL, &opt, &e, &err) == TR_OK, "%s", err.msg);
        for (int32_t i = 0; i < e.n; i++) {
            const unsigned char *s = (const unsigned char *)tr_tok_id_to_token(tok, e.ids[i]);
            while (s && *s && m < sizeof back) {
                uint32_t c = s[0] < 0x80 ? s[0] : (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
                s += s[0] < 0x80 ? 1 : 2;
                back[m++] = (char)(c < 512 && byte_of[c] >= 0 ? byte_of[c] : '?');
            }
        }
        if ((m != n || memcmp(text, back, n) != 0) && bad++ < 3)
            printf("  text %d: %zu bytes in, %zu bytes back\n", t, n, m);
        tr_tok_encoding_free(&e);
    }
    CHECK(bad == 0, "%d of 400 texts do not come back", bad);
    tr_tok_free(tok);
}

/* ------------------------------------------------------------ the word cache */
static char *word_text(int i, char *buf, size_t cap)
{
    static const char *const parts[] = { "blå", "bär", "smör", "gås", "ört", "kjøtt", "ing", "the", "’s", "🙂" };
    snprintf(buf, cap, "%s%s%s%d %s", parts[i % 10], parts[(i / 10) % 10], parts[(i / 100) % 10], i,
             parts[(i * 7) % 10]);
    return buf;
}

/* A warm cache (filled by 40000 other words, so slots were replaced many times, and by
 * threads encoding a big batch) gives the ids a freshly loaded tokenizer gives. */
static void test_cache_matches_cold(void)
{
    enum { B = 3000 };
    static char store[B][96];
    const char *texts[B];
    for (int i = 0; i < B; i++) texts[i] = word_text(i * 13, store[i], sizeof store[i]);
    tr_tokenizer *warm = load("tests/data/tok_modernbert");
    if (!warm) return;
    tr_error err = { 0 };
    for (int i = 0; i < 40000; i++) {
        char buf[96];
        tr_tok_encoding e;
        CHECK(tr_tok_encode(warm, word_text(i, buf, sizeof buf), NULL, NULL, &e, &err) == TR_OK, "%s", err.msg);
        tr_tok_encoding_free(&e);
    }
    tr_tok_options opt = { 1, 0, 0 };
    tr_tok_batch bt;
    CHECK(tr_tok_encode_batch(warm, texts, NULL, B, &opt, &bt, &err) == TR_OK, "%s", err.msg);
    int bad = 0;
    for (int i = 0; i < B && bt.ids; i++) {
        tr_tokenizer *cold = i % 500 == 0 ? load("tests/data/tok_modernbert") : NULL;
        tr_tok_encoding e, c;
        tr_tok_encode(warm, texts[i], NULL, &opt, &e, &err);
        if (cold) tr_tok_encode(cold, texts[i], NULL, &opt, &c, &err);
        for (int32_t j = 0; j < e.n; j++) {
            if (bt.ids[(size_t)i * bt.seq_len + j] != e.ids[j]) bad++;
            if (cold && (c.n != e.n || c.ids[j] != e.ids[j])) bad++;
        }
        tr_tok_encoding_free(&e);
        if (cold) { tr_tok_encoding_free(&c); tr_tok_free(cold); }
    }
    CHECK(bad == 0, "%d ids differ", bad);
    tr_tok_batch_free(&bt);
    tr_tok_free(warm);
}

/* ------------------------------------------------------------ input and file errors */
static void test_invalid_utf8_refused(void)
{
    tr_tokenizer *tok = load("tests/data/tok_roberta");
    if (!tok) return;
    const char *bad[] = { "bad \xC3\x28 utf8", "\xFF", "trunc \xE2\x82", "\xED\xA0\x80 surrogate", "\xC0\xAF overlong" };
    for (int i = 0; i < 5; i++) {
        tr_tok_encoding e;
        tr_error err = { 0 };
        CHECK(tr_tok_encode(tok, bad[i], NULL, NULL, &e, &err) == TR_EUSER && strstr(err.msg, "UTF-8"),
              "text %d: %s", i, err.msg);
        CHECK(e.ids == NULL && e.n == 0, "a failed encode leaves no buffers");
    }
    tr_tok_free(tok);
}

/* The RoBERTa file with one edit: the loader refuses it with TR_EUSER, naming the file and
 * saying why. */
static void expect_refused(const char *dir, const char *path, const char *orig, const char *from, const char *to,
                           const char *needle)
{
    const char *at = strstr(orig, from);
    CHECK(at != NULL, "the RoBERTa file lacks %s", from);
    if (!at) return;
    size_t head = (size_t)(at - orig), nf = strlen(from), nt = strlen(to), n = strlen(orig);
    char *buf = malloc(n - nf + nt + 1);
    memcpy(buf, orig, head);
    memcpy(buf + head, to, nt);
    memcpy(buf + head + nt, at + nf, n - head - nf + 1);
    CHECK(fc_spit(path, buf, strlen(buf)) == 0, "cannot write %s", path);
    free(buf);
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    int rc = tr_tok_load(&tok, dir, &err);
    CHECK(rc == TR_EUSER && tok == NULL, "%s -> %s: rc %d", from, to, rc);
    CHECK(strstr(err.msg, needle) && strstr(err.msg, path), "%s -> %s: message \"%s\" lacks \"%s\"", from, to,
          err.msg, needle);
    tr_tok_free(tok);
}

static void test_bad_files(void)
{
    char dir[] = "/tmp/tr_tokbpe_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t n;
    char *orig = fc_slurp("tests/data/tok_roberta/tokenizer.json", &n);
    CHECK(orig != NULL, "cannot read the RoBERTa file");
    if (!orig) return;
    expect_refused(dir, path, orig, "\"dropout\": null", "\"dropout\": 0.1", "dropout");
    expect_refused(dir, path, orig, "\"unk_token\": null", "\"unk_token\": \"<nope>\"", "unk_token \"<nope>\"");
    expect_refused(dir, path, orig, "\"i n\"", "\"i zz\"", "\"zz\" is not in model.vocab");
    expect_refused(dir, path, orig, "\"i n\"", "\"i  n\"", "merges[0] is neither");
    expect_refused(dir, path, orig, "\"i n\"", "[\"i\"]", "merges[0] is neither");
    expect_refused(dir, path, orig, "\"continuing_subword_prefix\": \"\"", "\"continuing_subword_prefix\": \"###\"",
                   "shorter than the continuing_subword_prefix");
    /* the first ByteLevel is the pre-tokenizer's (the decoder's comes later) */
    expect_refused(dir, path, orig, "\"type\": \"ByteLevel\"",
                   "\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}, \"behavior\": \"Isolated\"",
                   "Split is supported only on GPT-2's pattern");
    expect_refused(dir, path, orig, "\"type\": \"RobertaProcessing\"", "\"type\": \"Sequence\", \"processors\": [{\"type\": "
                   "\"BertProcessing\", \"cls\": [\"<s>\", 0], \"sep\": [\"</s>\", 2]}, {\"type\": \"BertProcessing\", "
                   "\"cls\": [\"<s>\", 0], \"sep\": [\"</s>\", 2]}], \"x\": \"RobertaProcessing\"", "two steps that add tokens");
    expect_refused(dir, path, orig, "\"type\": \"BPE\"", "\"type\": \"WordLevel\"", "\"WordLevel\" is not supported");
    free(orig);
    remove(path);
    rmdir(dir);
}

int main(void)
{
    RUN(test_roberta_golden);
    RUN(test_modernbert_golden);
    RUN(test_split_sequence_golden);
    RUN(test_prefix_suffix_unk_golden);
    RUN(test_byte_fallback_golden);
    RUN(test_special_ids);
    RUN(test_byte_level_round_trip);
    RUN(test_cache_matches_cold);
    RUN(test_invalid_utf8_refused);
    RUN(test_bad_files);
    return check_done();
}
