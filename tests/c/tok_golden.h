/* tok_golden.h — checks a tokenizer folder against a golden file of Hugging Face
 * `tokenizers` ids (tests/ref/make_tokenizer_golden.py, make_bpe_golden.py). Header-only
 * and static, like check.h; used by the tokenizer tests.
 *
 * A line {"text", "pair", "add_special_tokens", "max_length", "ids", "type_ids"} is one
 * encode; a line {"batch", "pairs", "max_length", "ids", "type_ids", "attention_mask"} is one
 * padded batch (rows padded to the longest with the pad id, as `tokenizers`' padding does).
 * Every id, type id and mask must be identical. */
#ifndef TR_TOK_GOLDEN_H
#define TR_TOK_GOLDEN_H

#include "check.h"
#include "trainer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int32_t tg_ids(json_t *arr, int32_t *dst, int cap)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if ((int)i < cap) dst[i] = (int32_t)json_integer_value(v);
    return (int32_t)json_array_size(arr);
}

static void tg_print(const char *what, const int32_t *ids, int32_t n)
{
    printf("   %s", what);
    for (int32_t i = 0; i < n && i < 40; i++) printf(" %d", ids[i]);
    printf("\n");
}

/* One encode line; returns whether it matched. */
static bool tg_encode_line(const tr_tokenizer *tok, json_t *o, const char *golden, int line, int *bad)
{
    tr_error err = { 0 };
    const char *text = json_string_value(json_object_get(o, "text"));
    const char *pair = json_string_value(json_object_get(o, "pair"));
    tr_tok_options opt = { json_is_true(json_object_get(o, "add_special_tokens")),
                           (int32_t)json_integer_value(json_object_get(o, "max_length")), 0 };
    int32_t want[1024], want_ty[1024];
    int32_t nw = tg_ids(json_object_get(o, "ids"), want, 1024);
    tg_ids(json_object_get(o, "type_ids"), want_ty, 1024);
    tr_tok_encoding e;
    int rc = tr_tok_encode(tok, text, pair, &opt, &e, &err);
    CHECK(rc == TR_OK, "%s line %d: %s", golden, line, err.msg);
    bool same = rc == TR_OK && e.n == nw && nw <= 1024;
    for (int32_t i = 0; same && i < nw; i++) same = e.ids[i] == want[i] && e.type_ids[i] == want_ty[i];
    if (!same && (*bad)++ < 5) {
        printf("  %s line %d: text \"%.60s\" pair %s add %d max %d\n", golden, line, text ? text : "(null)",
               pair ? pair : "-", opt.add_special_tokens, opt.max_length);
        tg_print("want:", want, nw);
        tg_print("got: ", e.ids, e.n);
    }
    tr_tok_encoding_free(&e);
    return same;
}

/* One padded-batch line; returns whether every cell matched. */
static bool tg_batch_line(const tr_tokenizer *tok, json_t *o, const char *golden, int line, int *bad)
{
    json_t *texts = json_object_get(o, "batch"), *pairs = json_object_get(o, "pairs");
    int32_t B = (int32_t)json_array_size(texts);
    const char *a[64], *b[64];
    if (B <= 0 || B > 64) return false;
    for (int32_t i = 0; i < B; i++) {
        a[i] = json_string_value(json_array_get(texts, (size_t)i));
        b[i] = json_string_value(json_array_get(pairs, (size_t)i));
    }
    tr_tok_options opt = { 1, (int32_t)json_integer_value(json_object_get(o, "max_length")), 0 };
    tr_tok_batch bt;
    tr_error err = { 0 };
    int rc = tr_tok_encode_batch(tok, a, json_is_array(pairs) ? b : NULL, B, &opt, &bt, &err);
    CHECK(rc == TR_OK, "%s line %d: %s", golden, line, err.msg);
    if (rc) return false;
    bool same = bt.batch == B;
    const char *fields[3] = { "ids", "type_ids", "attention_mask" };
    const int32_t *got[3] = { bt.ids, bt.type_ids, bt.attention_mask };
    for (int f = 0; f < 3 && same; f++)
        for (int32_t i = 0; i < B && same; i++) {
            int32_t want[1024];
            json_t *row = json_array_get(json_object_get(o, fields[f]), (size_t)i);
            same = tg_ids(row, want, 1024) == bt.seq_len && bt.seq_len <= 1024 &&
                   memcmp(want, got[f] + (size_t)i * bt.seq_len, (size_t)bt.seq_len * sizeof(int32_t)) == 0;
            if (!same && (*bad)++ < 5) {
                printf("  %s line %d: batch row %d, %s differ (seq_len %d)\n", golden, line, i, fields[f], bt.seq_len);
                tg_print("want:", want, (int32_t)json_array_size(row));
                tg_print("got: ", got[f] + (size_t)i * bt.seq_len, bt.seq_len);
            }
        }
    tr_tok_batch_free(&bt);
    return same;
}

/* Checks every line of golden against the tokenizer of dir; returns the lines checked. */
static int tg_check(const char *dir, const char *golden)
{
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    int rc = tr_tok_load(&tok, dir, &err);
    CHECK(rc == TR_OK, "load %s: %s", dir, err.msg);
    if (rc) return 0;
    FILE *f = fopen(golden, "r");
    CHECK(f != NULL, "cannot open %s", golden);
    if (!f) { tr_tok_free(tok); return 0; }
    static char line[1 << 17];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        CHECK(o != NULL, "%s line %d: %s", golden, n + 1, je.text);
        if (!o) break;
        bool same = json_object_get(o, "batch") ? tg_batch_line(tok, o, golden, n + 1, &bad)
                                                : tg_encode_line(tok, o, golden, n + 1, &bad);
        CHECK(same, "%s line %d differs from tokenizers", golden, n + 1);
        json_decref(o);
        n++;
    }
    fclose(f);
    tr_tok_free(tok);
    return n;
}

/* tests/data/tok_NAME against tests/data/tokenizer_golden_NAME.jsonl: more than min lines,
 * all identical. */
static void tg_golden_of(const char *name, int min)
{
    char dir[256], file[256];
    snprintf(dir, sizeof dir, "tests/data/tok_%s", name);
    snprintf(file, sizeof file, "tests/data/tokenizer_golden_%s.jsonl", name);
    int n = tg_check(dir, file);
    CHECK(n > min, "%s: only %d cases", file, n);
}

#endif
