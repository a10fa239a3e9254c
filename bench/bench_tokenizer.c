/* bench_tokenizer.c — tokenizer throughput on STS-B train sentences: sentences per
 * second for one-at-a-time encoding (one thread) and for padded batches of 64 and 1024
 * (the latter on OpenMP threads), and ids per second one at a time, with all-MiniLM-L6-v2's
 * tokenizer, the small Unigram test tokenizer and the byte-level BPE test tokenizers
 * (RoBERTa's and ModernBERT's layouts, vocabularies of 900: many ids per sentence).
 *
 *   build/rel/bench/bench_tokenizer [stsb_train.jsonl.gz] [model_dir] [more_dirs...]
 * Defaults: /work/shared/data/stsb_train.jsonl.gz, models/all-MiniLM-L6-v2 if present,
 * else tests/data/tok_minilm. Prints a table; asserts nothing. */
#include "trainer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>
#include "bench_clock.h"

/* Reads sentence1 and sentence2 of every line; returns the count, or -1. */
static int read_sentences(const char *path, char ***out)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz) return -1;
    char line[1 << 16];
    int n = 0, cap = 0;
    char **s = NULL;
    while (gzgets(gz, line, sizeof line)) {
        json_t *o = json_loads(line, 0, NULL);
        const char *keys[2] = { "sentence1", "sentence2" };
        for (int k = 0; o && k < 2; k++) {
            const char *t = json_string_value(json_object_get(o, keys[k]));
            if (!t) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                char **p = realloc(s, (size_t)cap * sizeof *p);
                if (!p) break;
                s = p;
            }
            s[n++] = strdup(t);
        }
        json_decref(o);
    }
    gzclose(gz);
    *out = s;
    return n;
}

static void run(const char *name, const char *dir, char **sent, int n)
{
    tr_tokenizer *tok = NULL;
    tr_error err = { 0 };
    if (tr_tok_load(&tok, dir, &err)) {
        printf("%-10s load failed: %s\n", name, err.msg);
        return;
    }
    const int reps = 3;
    long tokens = 0;
    double t0 = bench_now();
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            tr_tok_encoding e;
            if (tr_tok_encode(tok, sent[i], NULL, NULL, &e, &err) == TR_OK) tokens += e.n;
            tr_tok_encoding_free(&e);
        }
    double single = (double)reps * n / (bench_now() - t0);
    tr_tok_options opt = { 1, 128, 0 };
    double batched[2];
    const int sizes[2] = { 64, 1024 };
    for (int s = 0; s < 2; s++) {
        t0 = bench_now();
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < n; i += sizes[s]) {
                tr_tok_batch b;
                int m = n - i < sizes[s] ? n - i : sizes[s];
                if (tr_tok_encode_batch(tok, (const char *const *)sent + i, NULL, m, &opt, &b, &err) == TR_OK)
                    tr_tok_batch_free(&b);
            }
        batched[s] = (double)reps * n / (bench_now() - t0);
    }
    printf("%-10s %8d %12.0f %14.0f %16.0f %10.1f %12.0f\n", name, n, single, batched[0], batched[1],
           (double)tokens / reps / n, single * (double)tokens / reps / n);
    tr_tok_free(tok);
}

int main(int argc, char **argv)
{
    const char *data = argc > 1 ? argv[1] : "/work/shared/data/stsb_train.jsonl.gz";
    struct stat st;
    const char *minilm = argc > 2 ? argv[2]
                         : stat("models/all-MiniLM-L6-v2/tokenizer.json", &st) == 0 ? "models/all-MiniLM-L6-v2"
                                                                                   : "tests/data/tok_minilm";
    char **sent = NULL;
    int n = read_sentences(data, &sent);
    if (n <= 0) {
        fprintf(stderr, "bench_tokenizer: cannot read sentences from %s\n", data);
        return 1;
    }
    printf("tokenizer  sentences  sent/s 1-thr  sent/s batch64  sent/s batch1024  ids/sent  ids/s 1-thr\n");
    run("minilm", minilm, sent, n);
    run("unigram", "tests/data/tok_unigram", sent, n);
    run("roberta", "tests/data/tok_roberta", sent, n);
    run("modernbert", "tests/data/tok_modernbert", sent, n);
    for (int i = 3; i < argc; i++) run(argv[i], argv[i], sent, n);
    for (int i = 0; i < n; i++) free(sent[i]);
    free(sent);
    return 0;
}
