/* test_reader.c — the data readers (core/io/reader.h): JSONL/TSV/CSV records from plain and
 * gzip files, line numbers and offsets, CRLF, blank lines, BOM, CSV quoting, malformed
 * records that leave the reader usable, truncated gzip, the offset index and the seeded
 * shuffle. Files are written under /tmp and removed. */
#include "check.h"
#include "reader.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* tr_shuffle_below values pinned when the order was fixed (a changed order breaks resume of old runs). */
enum { PINNED_0 = 261241, PINNED_1 = 341525 };

/* ------------------------------------------------------------ helpers */

static char tmp_path[256];

static const char *path_for(const char *name)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/tr_test_reader_%d_%s", (int)getpid(), name);
    return tmp_path;
}

static const char *write_plain(const char *name, const char *text, size_t n)
{
    const char *p = path_for(name);
    FILE *f = fopen(p, "wb");
    if (!f) return p;
    fwrite(text, 1, n, f);
    fclose(f);
    return p;
}

static const char *write_gz(const char *name, const char *text, size_t n)
{
    const char *p = path_for(name);
    gzFile g = gzopen(p, "wb");
    if (!g) return p;
    gzwrite(g, text, (unsigned)n);
    gzclose(g);
    return p;
}

static tr_reader *open_ok(const char *path, int format)
{
    tr_reader *r = NULL;
    tr_error err = { 0 };
    int st = tr_reader_open(&r, path, format, 0, &err);
    CHECK(st == TR_OK && r, "open %s: %d %s", path, st, err.msg);
    return r;
}

/* ------------------------------------------------------------ JSONL lines */

static const char JSONL[] = "\xEF\xBB\xBF{\"a\": 1}\r\n"
                            "\n"
                            "   \r\n"
                            "{\"a\": 2}\n"
                            "{\"a\": \"x\ty\"}\r\n"
                            "{\"a\": 4}";   /* no final line end */

static void check_jsonl(tr_reader *r, int gz)
{
    tr_error err = { 0 };
    tr_record rec;
    const char *want[] = { "{\"a\": 1}", "{\"a\": 2}", "{\"a\": \"x\ty\"}", "{\"a\": 4}" };
    const int64_t lines[] = { 1, 4, 5, 6 };
    const int64_t offs[] = { 0, 19, 28, 42 };
    CHECK(tr_reader_is_gzip(r) == gz, "gzip %d", tr_reader_is_gzip(r));
    for (int i = 0; i < 4; i++) {
        int st = tr_reader_next(r, &rec, &err);
        CHECK(st == TR_OK && !rec.eof, "record %d: %s", i, err.msg);
        if (st || rec.eof) return;
        CHECK(strcmp(rec.text, want[i]) == 0 && rec.len == strlen(want[i]), "record %d: '%s'", i, rec.text);
        CHECK(rec.lineno == lines[i], "record %d line %lld", i, (long long)rec.lineno);
        CHECK(rec.offset == offs[i], "record %d offset %lld", i, (long long)rec.offset);
        CHECK(rec.nfields == 0, "jsonl has no fields");
    }
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.eof, "eof");
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.eof, "eof stays eof");
}

static void test_jsonl_plain_and_seek(void)
{
    const char *p = write_plain("a.jsonl", JSONL, sizeof JSONL - 1);
    tr_reader *r = open_ok(p, TR_FORMAT_JSONL);
    if (!r) return;
    check_jsonl(r, 0);
    tr_error err = { 0 };
    tr_record rec;
    CHECK(tr_reader_seek(r, 28, 5, &err) == TR_OK, "seek: %s", err.msg);
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && !rec.eof, "after seek");
    CHECK(rec.lineno == 5 && strcmp(rec.text, "{\"a\": \"x\ty\"}") == 0, "line %lld '%s'", (long long)rec.lineno,
          rec.text ? rec.text : "");
    CHECK(tr_reader_seek(r, 0, 1, &err) == TR_OK, "seek to start");
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && strcmp(rec.text, "{\"a\": 1}") == 0, "BOM dropped after seek");
    tr_reader_close(r);
    unlink(p);
}

static void test_jsonl_gzip(void)
{
    const char *p = write_gz("gzip_bytes.jsonl", JSONL, sizeof JSONL - 1);   /* no .gz: told by magic */
    tr_reader *r = open_ok(p, TR_FORMAT_JSONL);
    if (!r) return;
    check_jsonl(r, 1);
    tr_error err = { 0 };
    CHECK(tr_reader_seek(r, 0, 1, &err) == TR_EUSER && strstr(err.msg, "gzip"), "seek refused: %s", err.msg);
    tr_reader_close(r);
    unlink(p);
}

static void test_truncated_gzip(void)
{
    char big[200000];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof big; i++) n += (size_t)snprintf(big + n, sizeof big - n, "{\"i\": %d, \"t\": \"row %d\"}\n", i, i * 7919);
    const char *p = write_gz("t.jsonl.gz", big, n);
    FILE *f = fopen(p, "rb");
    CHECK(f != NULL, "reopen");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fclose(f);
    CHECK(truncate(p, sz / 2) == 0, "truncate");
    tr_reader *r = open_ok(p, TR_FORMAT_JSONL);
    if (!r) return;
    tr_error err = { 0 };
    tr_record rec;
    int st = TR_OK, count = 0;
    while ((st = tr_reader_next(r, &rec, &err)) == TR_OK && !rec.eof) count++;
    CHECK(st == TR_EUSER, "truncation is an error, got %d after %d records", st, count);
    CHECK(count > 10, "the intact part was read first (%d)", count);
    CHECK(strstr(err.msg, "truncated") && strstr(err.msg, p), "message: %s", err.msg);
    CHECK(rec.malformed == 0, "truncation is fatal");
    tr_error err2 = { 0 };
    CHECK(tr_reader_next(r, &rec, &err2) == TR_EUSER && strcmp(err.msg, err2.msg) == 0, "stays failed: %s", err2.msg);
    tr_reader_close(r);
    unlink(p);
}

/* ------------------------------------------------------------ TSV */

static void test_tsv(void)
{
    static const char T[] = "sentence1\tsentence2\tscore\r\n"
                            "A \"quoted\" one.\tB\t4.5\r\n"
                            "\r\n"
                            "only\ttwo\n"
                            "C\t\t0\n";
    const char *p = write_gz("a.tsv.gz", T, sizeof T - 1);
    tr_reader *r = open_ok(p, TR_FORMAT_TSV);
    if (!r) return;
    tr_error err = { 0 };
    tr_record rec;
    CHECK(tr_reader_ncolumns(r) == 3 && strcmp(tr_reader_column(r, 2), "score") == 0, "header");
    CHECK(tr_reader_column(r, 3) == NULL, "column out of range");
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.nfields == 3, "row 1: %s", err.msg);
    CHECK(strcmp(rec.fields[0], "A \"quoted\" one.") == 0 && strcmp(rec.fields[2], "4.5") == 0, "fields '%s' '%s'",
          rec.fields[0], rec.fields[2]);
    CHECK(rec.lineno == 2, "line %lld", (long long)rec.lineno);
    int st = tr_reader_next(r, &rec, &err);
    CHECK(st == TR_EUSER && rec.malformed && rec.lineno == 4, "short row: %d line %lld", st, (long long)rec.lineno);
    CHECK(strstr(err.msg, "line 4: 2 fields, but the header has 3 (sentence1, sentence2, score)"), "msg: %s", err.msg);
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.nfields == 3 && rec.lineno == 5, "usable after: %s", err.msg);
    CHECK(rec.field_len[1] == 0 && strcmp(rec.fields[0], "C") == 0, "empty field");
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.eof, "eof");
    tr_reader_close(r);
    unlink(p);
}

static void test_header_required(void)
{
    const char *p = write_plain("empty.tsv", "\n\n", 2);
    tr_reader *r = NULL;
    tr_error err = { 0 };
    CHECK(tr_reader_open(&r, p, TR_FORMAT_TSV, 0, &err) == TR_EUSER && !r, "empty file refused");
    CHECK(strstr(err.msg, "header row"), "msg: %s", err.msg);
    unlink(p);
    p = write_plain("dup.csv", "a,b,a\n1,2,3\n", 12);
    CHECK(tr_reader_open(&r, p, TR_FORMAT_CSV, 0, &err) == TR_EUSER && strstr(err.msg, "'a' appears twice"),
          "duplicate column: %s", err.msg);
    unlink(p);
    CHECK(tr_reader_open(&r, "/nonexistent/x.jsonl", TR_FORMAT_JSONL, 0, &err) == TR_EUSER &&
          strstr(err.msg, "/nonexistent/x.jsonl: cannot open"), "missing file: %s", err.msg);
}

/* ------------------------------------------------------------ CSV */

static void test_csv_quotes(void)
{
    static const char C[] = "\xEF\xBB\xBFtext,label\r\n"
                            "\"Hello, world\",1\r\n"
                            "\"She said \"\"hi\"\"\",2\n"
                            "plain \"inner\" quote,3\n"
                            "\"two\r\nlines\",4\n"
                            "\"bad\"x,5\n"
                            ",\n"
                            "\"\",\"\"\n"
                            "last,\"7\"";
    const char *p = write_plain("q.csv", C, sizeof C - 1);
    tr_reader *r = open_ok(p, TR_FORMAT_CSV);
    if (!r) return;
    tr_error err = { 0 };
    tr_record rec;
    CHECK(tr_reader_ncolumns(r) == 2 && strcmp(tr_reader_column(r, 0), "text") == 0, "BOM dropped from header: '%s'",
          tr_reader_column(r, 0));
    const char *want0[] = { "Hello, world", "She said \"hi\"", "plain \"inner\" quote", "two\nlines" };
    const char *want1[] = { "1", "2", "3", "4" };
    const int64_t lines[] = { 2, 3, 4, 5 };
    for (int i = 0; i < 4; i++) {
        int st = tr_reader_next(r, &rec, &err);
        CHECK(st == TR_OK && rec.nfields == 2, "row %d: %s", i, err.msg);
        if (st || rec.nfields != 2) return;
        CHECK(strcmp(rec.fields[0], want0[i]) == 0 && strcmp(rec.fields[1], want1[i]) == 0, "row %d: '%s' '%s'", i,
              rec.fields[0], rec.fields[1]);
        CHECK(rec.lineno == lines[i], "row %d line %lld", i, (long long)rec.lineno);
    }
    int st = tr_reader_next(r, &rec, &err);
    CHECK(st == TR_EUSER && rec.malformed && strstr(err.msg, "line 7: field 'text' (column 1): text after the closing quote"),
          "bad quote: %s", err.msg);
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.nfields == 2 && rec.field_len[0] == 0 && rec.field_len[1] == 0,
          "two empty fields: %s", err.msg);
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.nfields == 2 && rec.field_len[0] == 0, "quoted empty");
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && strcmp(rec.fields[1], "7") == 0 && rec.lineno == 10, "last row");
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.eof, "eof");
    tr_reader_close(r);
    unlink(p);
}

static void test_csv_unclosed_quote(void)
{
    static const char C[] = "a,b\n1,\"open\n2,3\n";
    const char *p = write_plain("u.csv", C, sizeof C - 1);
    tr_reader *r = open_ok(p, TR_FORMAT_CSV);
    if (!r) return;
    tr_error err = { 0 };
    tr_record rec;
    int st = tr_reader_next(r, &rec, &err);
    CHECK(st == TR_EUSER && strstr(err.msg, "line 2: the quoted field 'b' opened here is not closed"), "msg: %s", err.msg);
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.eof, "then eof");
    tr_reader_close(r);
    unlink(p);
}

static void test_long_line(void)
{
    static const char J[] = "{\"a\":1}\n{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1}\n{\"b\":2}\n";
    const char *p = write_plain("long.jsonl", J, sizeof J - 1);
    tr_reader *r = NULL;
    tr_error err = { 0 };
    tr_record rec;
    CHECK(tr_reader_open(&r, p, TR_FORMAT_JSONL, 32, &err) == TR_OK, "open");
    if (!r) return;
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.lineno == 1, "line 1");
    CHECK(tr_reader_next(r, &rec, &err) == TR_EUSER && rec.malformed && strstr(err.msg, "line 2 is longer than 32 bytes"),
          "long: %s", err.msg);
    CHECK(tr_reader_next(r, &rec, &err) == TR_OK && rec.lineno == 3 && strcmp(rec.text, "{\"b\":2}") == 0, "line 3");
    tr_reader_close(r);
    /* the very first line too long: nothing buffered yet */
    CHECK(tr_reader_open(&r, p, TR_FORMAT_JSONL, 4, &err) == TR_OK, "open");
    if (!r) return;
    CHECK(tr_reader_next(r, &rec, &err) == TR_EUSER && rec.malformed && rec.lineno == 1, "first line long: %s", err.msg);
    tr_reader_close(r);
    unlink(p);
}

/* Random text over the bytes that matter to the parsers: every format reads it to the
 * end without a sanitizer report, an endless loop or a record without its fields. */
static void test_random_text_terminates(void)
{
    static const char alphabet[] = "ab,\"\t\r\n\n \xEF\xBB\xBF{}";
    char text[600];
    uint32_t s = 12345;
    for (int iter = 0; iter < 300; iter++) {
        size_t n = (size_t)(iter * 2 % 599);
        for (size_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            text[i] = alphabet[(s >> 16) % (sizeof alphabet - 1)];
        }
        const char *p = write_plain("fuzz.txt", text, n);
        for (int format = 0; format < 3; format++) {
            tr_reader *r = NULL;
            tr_error err = { 0 };
            if (tr_reader_open(&r, p, format, 64, &err) != TR_OK) continue;
            tr_record rec;
            int guard = 0, st;
            while (guard++ < 1000) {
                st = tr_reader_next(r, &rec, &err);
                if (st == TR_OK && rec.eof) break;
                if (st != TR_OK && !rec.malformed) break;
                if (st == TR_OK && format != TR_FORMAT_JSONL)
                    CHECK(rec.nfields == tr_reader_ncolumns(r), "fields %d", rec.nfields);
            }
            CHECK(guard < 1000, "iteration %d format %d does not end", iter, format);
            tr_reader_close(r);
        }
        unlink(p);
    }
}

/* ------------------------------------------------------------ index and shuffle */

static void test_index_reads_back(void)
{
    char text[4096];
    size_t n = 0;
    for (int i = 0; i < 100; i++) n += (size_t)snprintf(text + n, sizeof text - n, "%s{\"i\": %d}\n", i % 7 ? "" : "\n", i);
    const char *p = write_plain("ix.jsonl", text, n);
    tr_reader *r = open_ok(p, TR_FORMAT_JSONL);
    tr_row_index *ix = NULL;
    tr_error err = { 0 };
    CHECK(tr_row_index_new(&ix, &err) == TR_OK, "new");
    if (!r || !ix) return;
    tr_record rec;
    while (tr_reader_next(r, &rec, &err) == TR_OK && !rec.eof) tr_row_index_push(ix, rec.offset, rec.lineno, &err);
    CHECK(tr_row_index_count(ix) == 100, "count %lld", (long long)tr_row_index_count(ix));
    CHECK(tr_row_index_set_order(ix, 1, 42, 0, 1, &err) == TR_OK, "order");
    int seen[100] = { 0 };
    int moved = 0;
    for (int64_t k = 0; k < 100; k++) {
        int64_t i = tr_row_index_order(ix, k);
        CHECK(i >= 0 && i < 100, "order %lld", (long long)i);
        if (i < 0 || i >= 100) return;
        seen[i]++;
        moved += i != k;
        CHECK(tr_reader_seek(r, tr_row_index_offset(ix, i), tr_row_index_lineno(ix, i), &err) == TR_OK, "seek");
        CHECK(tr_reader_next(r, &rec, &err) == TR_OK && !rec.eof, "read");
        int v = -1;
        sscanf(rec.text, "{\"i\": %d}", &v);
        CHECK(v == i && rec.lineno == tr_row_index_lineno(ix, i), "row %lld read %d at line %lld", (long long)i, v,
              (long long)rec.lineno);
    }
    for (int i = 0; i < 100; i++) CHECK(seen[i] == 1, "permutation: %d seen %d times", i, seen[i]);
    CHECK(moved > 80, "shuffled (%d moved)", moved);
    CHECK(tr_row_index_order(ix, 100) == -1 && tr_row_index_offset(ix, -1) == -1, "range");
    CHECK(tr_row_index_set_order(ix, 0, 42, 0, 1, &err) == TR_OK && tr_row_index_order(ix, 17) == 17, "unshuffled");
    tr_row_index_free(ix);
    tr_reader_close(r);
    unlink(p);
}

static void test_shuffle_deterministic(void)
{
    int64_t a[50], b[50], c[50];
    tr_shuffle_perm(a, 50, 7, 3, 1);
    tr_shuffle_perm(b, 50, 7, 3, 1);
    tr_shuffle_perm(c, 50, 7, 4, 1);
    CHECK(memcmp(a, b, sizeof a) == 0, "same key, same order");
    CHECK(memcmp(a, c, sizeof a) != 0, "another epoch, another order");
    int hist[10] = { 0 };
    for (uint64_t k = 0; k < 10000; k++) {
        int64_t j = tr_shuffle_below(1, 0, 9, k, 10);
        CHECK(j >= 0 && j < 10, "range %lld", (long long)j);
        if (j >= 0 && j < 10) hist[j]++;
    }
    for (int i = 0; i < 10; i++) CHECK(hist[i] > 850 && hist[i] < 1150, "bucket %d: %d", i, hist[i]);
    CHECK(tr_shuffle_below(1, 0, 9, 0, 1) == 0, "n = 1");
    /* Pinned values: the order must not change between versions or machines. */
    CHECK(tr_shuffle_below(42, 0, 1, 0, 1000000) == PINNED_0, "pinned 0: %lld", (long long)tr_shuffle_below(42, 0, 1, 0, 1000000));
    CHECK(tr_shuffle_below(42, 5, 2, 123456789012ull, 1000000) == PINNED_1, "pinned 1: %lld",
          (long long)tr_shuffle_below(42, 5, 2, 123456789012ull, 1000000));
}

int main(void)
{
    RUN(test_jsonl_plain_and_seek);
    RUN(test_jsonl_gzip);
    RUN(test_truncated_gzip);
    RUN(test_tsv);
    RUN(test_header_required);
    RUN(test_csv_quotes);
    RUN(test_csv_unclosed_quote);
    RUN(test_long_line);
    RUN(test_random_text_terminates);
    RUN(test_index_reads_back);
    RUN(test_shuffle_deterministic);
    return check_done();
}
