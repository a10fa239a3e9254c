/* test_tokenizer_fuzz.c — damaged tokenizer.json files never crash the loader.
 *
 * Takes valid tokenizer.json files (WordPiece, Unigram, byte-level BPE with merges as "a b"
 * strings and as [a, b] pairs) and writes thousands of damaged copies: truncations, random
 * byte changes, JSON-significant characters swapped in, numbers made huge or negative,
 * strings cut. Each must either load (and then encode texts, pairs and a batch without a
 * sanitizer report) or fail with TR_EUSER and a message naming the file. Deterministic
 * seed; run under ASan+UBSan by `make test`. */
#include "check.h"
#include "file_check.h"
#include "trainer.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cases_loaded, cases_refused;

/* Loads dir; on success exercises the tokenizer; on failure checks the error's form. */
static void try_load(const char *dir)
{
    tr_tokenizer *tok = NULL;
    tr_error err;
    tr_error_clear(&err);
    int rc = tr_tok_load(&tok, dir, &err);
    if (rc != TR_OK) {
        CHECK(rc == TR_EUSER, "status %d: %s", rc, err.msg);
        CHECK(err.msg[0] != '\0', "empty message");
        CHECK(strstr(err.msg, "tokenizer") != NULL, "message does not name the file: %s", err.msg);
        CHECK(tok == NULL, "a failed load returned a tokenizer");
        cases_refused++;
        return;
    }
    cases_loaded++;
    static const char *texts[] = { "Hej, hur mår du?", "The quick brown fox", "", "æøå ÄÖ über 東京 🙂",
                                   "a\tb\u200bc" };
    for (int i = 0; i < 5; i++) {
        tr_tok_encoding enc;
        memset(&enc, 0, sizeof enc);
        tr_error e2;
        tr_error_clear(&e2);
        if (tr_tok_encode(tok, texts[i], i % 2 ? texts[(i + 1) % 5] : NULL, NULL, &enc, &e2) == TR_OK) {
            for (int32_t j = 0; j < enc.n; j++)
                CHECK(enc.ids[j] >= 0 && enc.ids[j] < tr_tok_vocab_size(tok) + 1000000, "id %d", enc.ids[j]);
            tr_tok_encoding_free(&enc);
        } else {
            CHECK(e2.status == TR_EUSER, "encode status %d: %s", e2.status, e2.msg);
        }
    }
    tr_tok_batch b;
    memset(&b, 0, sizeof b);
    tr_tok_options opt = { 1, 16, 0 };
    tr_error e3;
    tr_error_clear(&e3);
    if (tr_tok_encode_batch(tok, texts, NULL, 5, &opt, &b, &e3) == TR_OK) tr_tok_batch_free(&b);
    tr_tok_free(tok);
}

/* share: 1 for every mutation below, 2 for half of each kind (a file with a larger
 * vocabulary to parse per load, so that the whole test stays short under ASan). */
static void fuzz_one(const char *source_dir, const char *work, int share)
{
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/tokenizer.json", source_dir);
    snprintf(dst, sizeof dst, "%s/tokenizer.json", work);
    size_t len = 0;
    char *orig = fc_slurp(src, &len);
    CHECK(orig != NULL, "cannot read %s", src);
    if (!orig) return;
    char *buf = malloc(len + 64);

    /* 1. truncation at ~400 lengths, including every length of the first 64 bytes */
    size_t step = len / (400 / (size_t)share) + 1;
    for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : step)) {
        fc_spit(dst, orig, cut);
        try_load(work);
    }
    /* 2. random single-byte changes */
    for (int i = 0; i < 1200 / share; i++) {
        memcpy(buf, orig, len);
        size_t at = next_rand() % len;
        buf[at] = (char)(next_rand() & 0xff);
        fc_spit(dst, buf, len);
        try_load(work);
    }
    /* 3. JSON-significant characters swapped in, and numbers made extreme */
    static const char swaps[] = "{}[]\":,0-9e \\";
    static const char *numbers[] = { "-1", "2147483648", "99999999999999999999", "1e308", "-0.5", "null",
                                     "\"x\"", "[]", "{}" };
    for (int i = 0; i < 800 / share; i++) {
        memcpy(buf, orig, len);
        size_t n = len;
        if (i % 2 == 0) {
            size_t at = next_rand() % len;
            buf[at] = swaps[next_rand() % (sizeof swaps - 1)];
        } else {
            /* replace a run of digits (a number: an id, a score, an offset) */
            size_t at = next_rand() % len;
            while (at < len && (buf[at] < '0' || buf[at] > '9')) at++;
            if (at >= len) continue;
            size_t end = at;
            while (end < len && ((buf[end] >= '0' && buf[end] <= '9') || buf[end] == '.' || buf[end] == '-')) end++;
            const char *rep = numbers[next_rand() % (sizeof numbers / sizeof numbers[0])];
            size_t rl = strlen(rep);
            if (n - (end - at) + rl > len + 63) continue;
            memmove(buf + at + rl, buf + end, n - end);
            memcpy(buf + at, rep, rl);
            n = n - (end - at) + rl;
        }
        fc_spit(dst, buf, n);
        try_load(work);
    }
    free(buf);
    free(orig);
}

static void test_fuzz_wordpiece_unigram_bpe(void)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char work[256];
    snprintf(work, sizeof work, "%s/tr_tokfuzz_%d", base, (int)getpid());
    mkdir(work, 0700);
    fuzz_one("tests/data/tok_scandi", work, 1);
    fuzz_one("tests/data/tok_unigram", work, 1);
    fuzz_one("tests/data/tok_bpe_split", work, 2);   /* "a b" merges, Split + ByteLevel */
    fuzz_one("tests/data/tok_modernbert", work, 2);  /* [a, b] merges, NFC, added runs of spaces */
    char path[300];
    snprintf(path, sizeof path, "%s/tokenizer.json", work);
    unlink(path);
    rmdir(work);
    /* The mutations must have exercised both outcomes. */
    printf("# %d damaged files loaded and encoded, %d refused with a message\n", cases_loaded, cases_refused);
    CHECK(cases_loaded > 50 && cases_refused > 500, "loaded %d, refused %d", cases_loaded, cases_refused);
}

int main(void)
{
    RUN(test_fuzz_wordpiece_unigram_bpe);
    return check_done();
}
