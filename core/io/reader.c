/* reader.c — the record readers of reader.h: a line reader over a zlib gz* stream (a
 * file starting with the gzip magic bytes 1f 8b) or a plain file descriptor (anything
 * else), and the JSONL / TSV / CSV record parsers on top of it. Plain files are read with
 * read(2) directly, not through gz*'s transparent mode, so that a seek costs one small
 * read (4 KiB, doubling while a record continues) instead of a refill of zlib's buffer.
 *
 * Invariants: `pos` is the uncompressed byte offset of buf[beg], so the offset of a
 * line is `pos` when its first byte is taken; `lineno` counts the lines consumed so far
 * (the last line read is line `lineno`); memory is one read chunk plus the longest
 * record seen (capped by max_line), never a function of the file size. */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { READ_CHUNK = 1 << 16, SEEK_CHUNK = 1 << 12, GZ_BUFFER = 1 << 17 };
static const size_t DEFAULT_MAX_LINE = (size_t)64 << 20;

struct tr_reader {
    gzFile gz;                 /* gzip files */
    int fd;                    /* plain files (-1 when gz is used) */
    char *path;
    int32_t format;
    int32_t gzip;
    size_t max_line;

    unsigned char *buf;        /* read chunk: buf[beg..end) not yet consumed */
    size_t beg, end;
    size_t chunk;              /* bytes the next plain read asks for (<= READ_CHUNK) */
    int at_eof;
    int64_t pos;
    int64_t lineno;

    char *line;                /* the current line, NUL-terminated */
    size_t line_len, line_cap;
    int64_t line_offset;

    char *fbuf;                /* fields of the current record, each NUL-terminated */
    size_t fbuf_len, fbuf_cap;
    size_t *foff, *flen;
    const char **fptr;
    int32_t nf, fcap;

    int32_t ncols;
    char **cols;

    tr_error fatal;            /* status != 0 once a fatal error happened */
};

/* ------------------------------------------------------------ growable buffers */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int oom(tr_reader *r, tr_error *err)
{
    return tr_fail(err, TR_EOOM, "%s: out of host memory while reading a record", r->path);
}

/* ------------------------------------------------------------ errors */

static int fail_fatal(tr_reader *r, tr_record *rec, tr_error *err, int status, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tr_fail(&r->fatal, status, "%s", msg);
    if (rec) rec->malformed = 0;
    return tr_fail(err, status, "%s", msg);
}

static int fail_record(tr_record *rec, tr_error *err, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rec->malformed = 1;
    return tr_fail(err, TR_EUSER, "%s", msg);
}

/* ------------------------------------------------------------ lines */

/* Refills the chunk when it is used up; sets at_eof at the end of the stream. */
static int fill(tr_reader *r, tr_error *err)
{
    if (r->beg < r->end || r->at_eof) return TR_OK;
    if (!r->gz) {
        ssize_t n;
        do n = read(r->fd, r->buf, r->chunk);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return fail_fatal(r, NULL, err, TR_EINTERNAL, "%s: read failed after byte %lld: %s", r->path,
                              (long long)r->pos, strerror(errno));
        if (r->chunk < READ_CHUNK) r->chunk *= 2;
        r->beg = 0;
        r->end = (size_t)n;
        if (n == 0) r->at_eof = 1;
        return TR_OK;
    }
    int n = gzread(r->gz, r->buf, READ_CHUNK);
    int zerr = Z_OK;
    const char *zmsg = gzerror(r->gz, &zerr);
    if (n < 0 || (n == 0 && zerr != Z_OK)) {
        if (zerr == Z_ERRNO)
            return fail_fatal(r, NULL, err, TR_EINTERNAL, "%s: read failed after byte %lld: %s", r->path,
                              (long long)r->pos, strerror(errno));
        return fail_fatal(r, NULL, err, TR_EUSER,
                          "%s: the gzip stream is truncated or corrupt after %lld uncompressed bytes (line %lld): "
                          "%s. Re-create or re-download the file (gzip -t %s checks it)",
                          r->path, (long long)r->pos, (long long)r->lineno + 1, zmsg ? zmsg : "zlib error", r->path);
    }
    r->beg = 0;
    r->end = (size_t)n;
    if (n == 0) r->at_eof = 1;
    return TR_OK;
}

/* Reads the next line into r->line; *got = 0 at the end of the file. A line longer than
 * max_line is consumed whole and reported as malformed. */
static int read_line(tr_reader *r, tr_record *rec, int *got, tr_error *err)
{
    r->line_len = 0;
    r->line_offset = r->pos;
    int any = 0, too_long = 0;
    for (;;) {
        int st = fill(r, err);
        if (st) return st;
        if (r->beg == r->end) break;
        unsigned char *p = r->buf + r->beg;
        size_t avail = r->end - r->beg;
        unsigned char *nl = memchr(p, '\n', avail);
        size_t take = nl ? (size_t)(nl - p) : avail;
        any = 1;
        if (!too_long && r->line_len + take > r->max_line) too_long = 1;
        if (!too_long) {
            if (grow((void **)&r->line, &r->line_cap, r->line_len + take + 1, 1)) return oom(r, err);
            memcpy(r->line + r->line_len, p, take);
            r->line_len += take;
        }
        r->beg += take;
        r->pos += (int64_t)take;
        if (nl) {
            r->beg++;
            r->pos++;
            break;
        }
    }
    *got = any;
    if (!any) return TR_OK;
    r->lineno++;
    if (too_long) {
        if (grow((void **)&r->line, &r->line_cap, 1, 1)) return oom(r, err);
        r->line_len = 0;
        r->line[0] = 0;
        return fail_record(rec, err, "%s: line %lld is longer than %zu bytes: not a text data file, or one "
                           "record per line is not how it is laid out", r->path, (long long)r->lineno, r->max_line);
    }
    if (grow((void **)&r->line, &r->line_cap, r->line_len + 1, 1)) return oom(r, err);
    if (r->line_len && r->line[r->line_len - 1] == '\r') r->line_len--;
    r->line[r->line_len] = 0;
    if (r->line_offset == 0 && r->line_len >= 3 && memcmp(r->line, "\xEF\xBB\xBF", 3) == 0) {
        memmove(r->line, r->line + 3, r->line_len - 3 + 1);
        r->line_len -= 3;
    }
    return TR_OK;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* Reads lines until a non-blank one; *got = 0 at the end of the file. */
static int read_nonblank(tr_reader *r, tr_record *rec, int *got, tr_error *err)
{
    for (;;) {
        int st = read_line(r, rec, got, err);
        if (st || !*got) return st;
        if (!is_blank(r->line, r->line_len)) return TR_OK;
    }
}

/* ------------------------------------------------------------ fields */

static int field_append(tr_reader *r, const char *s, size_t n, tr_error *err)
{
    if (grow((void **)&r->fbuf, &r->fbuf_cap, r->fbuf_len + n + 1, 1)) return oom(r, err);
    memcpy(r->fbuf + r->fbuf_len, s, n);
    r->fbuf_len += n;
    return TR_OK;
}

/* Ends the field that started at fbuf offset `start`. */
static int field_end(tr_reader *r, size_t start, tr_error *err)
{
    size_t cap = (size_t)r->fcap;
    if (grow((void **)&r->foff, &cap, (size_t)r->nf + 1, sizeof *r->foff)) return oom(r, err);
    cap = (size_t)r->fcap;
    if (grow((void **)&r->flen, &cap, (size_t)r->nf + 1, sizeof *r->flen)) return oom(r, err);
    cap = (size_t)r->fcap;
    if (grow((void **)&r->fptr, &cap, (size_t)r->nf + 1, sizeof *r->fptr)) return oom(r, err);
    r->fcap = (int32_t)cap;
    if (field_append(r, "", 0, err)) return TR_EOOM;
    r->fbuf[r->fbuf_len++] = 0;
    r->foff[r->nf] = start;
    r->flen[r->nf] = r->fbuf_len - 1 - start;
    r->nf++;
    return TR_OK;
}

static void fields_begin(tr_reader *r)
{
    r->fbuf_len = 0;
    r->nf = 0;
}

static void fields_publish(tr_reader *r, tr_record *rec)
{
    for (int32_t i = 0; i < r->nf; i++) r->fptr[i] = r->fbuf + r->foff[i];
    rec->nfields = r->nf;
    rec->fields = r->fptr;
    rec->field_len = r->flen;
}

static const char *column_name(const tr_reader *r, int32_t i, char *tmp, size_t n)
{
    if (i < r->ncols) return r->cols[i];
    snprintf(tmp, n, "#%d", (int)i + 1);
    return tmp;
}

static int split_tsv(tr_reader *r, tr_error *err)
{
    fields_begin(r);
    size_t start = 0;
    const char *s = r->line;
    for (size_t i = 0;; i++) {
        if (i == r->line_len || s[i] == '\t') {
            if (field_append(r, s + start, i - start, err)) return TR_EOOM;
            if (field_end(r, r->fbuf_len - (i - start), err)) return TR_EOOM;
            if (i == r->line_len) break;
            start = i + 1;
        }
    }
    return TR_OK;
}

enum { CSV_START, CSV_UNQUOTED, CSV_QUOTED, CSV_QUOTED_QUOTE };

/* Parses one CSV record starting with the line in r->line, reading more lines while a
 * quoted field is open. */
static int split_csv(tr_reader *r, tr_record *rec, tr_error *err)
{
    fields_begin(r);
    int state = CSV_START;
    size_t start = 0;
    int64_t first = r->lineno;
    for (;;) {
        const char *s = r->line;
        for (size_t i = 0; i < r->line_len; i++) {
            char c = s[i];
            switch (state) {
            case CSV_START:
                start = r->fbuf_len;
                if (c == '"') state = CSV_QUOTED;
                else if (c == ',') { if (field_end(r, start, err)) return TR_EOOM; }
                else { if (field_append(r, &c, 1, err)) return TR_EOOM; state = CSV_UNQUOTED; }
                break;
            case CSV_UNQUOTED:
                if (c == ',') { if (field_end(r, start, err)) return TR_EOOM; state = CSV_START; }
                else if (field_append(r, &c, 1, err)) return TR_EOOM;
                break;
            case CSV_QUOTED:
                if (c == '"') state = CSV_QUOTED_QUOTE;
                else if (field_append(r, &c, 1, err)) return TR_EOOM;
                break;
            default: /* CSV_QUOTED_QUOTE */
                if (c == '"') { if (field_append(r, &c, 1, err)) return TR_EOOM; state = CSV_QUOTED; }
                else if (c == ',') { if (field_end(r, start, err)) return TR_EOOM; state = CSV_START; }
                else {
                    char tmp[16];
                    return fail_record(rec, err, "%s: line %lld: field '%s' (column %d): text after the closing "
                                       "quote; inside a quoted CSV field write a quote as \"\"",
                                       r->path, (long long)r->lineno, column_name(r, r->nf, tmp, sizeof tmp),
                                       (int)r->nf + 1);
                }
            }
        }
        if (state != CSV_QUOTED) break;
        int got = 0;
        if (field_append(r, "\n", 1, err)) return TR_EOOM;
        int st = read_line(r, rec, &got, err);
        if (st) return st;
        if (!got) {
            char tmp[16];
            return fail_record(rec, err, "%s: line %lld: the quoted field '%s' opened here is not closed before the "
                               "end of the file; close it with '\"' (a quote inside a field is written \"\")",
                               r->path, (long long)first, column_name(r, r->nf, tmp, sizeof tmp));
        }
    }
    if (state == CSV_START) start = r->fbuf_len;
    return field_end(r, start, err);
}

/* ------------------------------------------------------------ open and close */

static int read_header(tr_reader *r, tr_error *err)
{
    tr_record rec;
    memset(&rec, 0, sizeof rec);
    int got = 0;
    int st = read_nonblank(r, &rec, &got, err);
    if (st) return st;
    if (!got)
        return tr_fail(err, TR_EUSER, "%s: the file is empty; a %s file needs a header row naming its columns",
                       r->path, r->format == TR_FORMAT_TSV ? "TSV" : "CSV");
    st = r->format == TR_FORMAT_TSV ? split_tsv(r, err) : split_csv(r, &rec, err);
    if (st) return st;
    r->cols = calloc((size_t)r->nf, sizeof *r->cols);
    if (!r->cols) return oom(r, err);
    r->ncols = r->nf;
    for (int32_t i = 0; i < r->nf; i++) {
        const char *name = r->fbuf + r->foff[i];
        if (!name[0])
            return tr_fail(err, TR_EUSER, "%s: line %lld: header column %d is empty; name every column",
                           r->path, (long long)r->lineno, (int)i + 1);
        for (int32_t j = 0; j < i; j++)
            if (strcmp(r->cols[j], name) == 0)
                return tr_fail(err, TR_EUSER, "%s: line %lld: header column '%s' appears twice; rename one",
                               r->path, (long long)r->lineno, name);
        r->cols[i] = strdup(name);
        if (!r->cols[i]) return oom(r, err);
    }
    return TR_OK;
}

int tr_reader_open(tr_reader **out, const char *path, int32_t format, size_t max_line, tr_error *err)
{
    *out = NULL;
    if (format < TR_FORMAT_JSONL || format > TR_FORMAT_CSV)
        return tr_fail(err, TR_EUSER, "%s: unknown data format %d (0 jsonl, 1 tsv, 2 csv)", path, (int)format);
    tr_reader *r = calloc(1, sizeof *r);
    if (!r) return tr_fail(err, TR_EOOM, "%s: out of host memory opening the file", path);
    r->fd = -1;
    r->path = strdup(path);
    r->buf = malloc(READ_CHUNK);
    if (!r->path || !r->buf) {
        tr_reader_close(r);
        return tr_fail(err, TR_EOOM, "%s: out of host memory opening the file", path);
    }
    r->format = format;
    r->max_line = max_line ? max_line : DEFAULT_MAX_LINE;
    r->chunk = READ_CHUNK;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        int e = errno;
        tr_reader_close(r);
        return tr_fail(err, TR_EUSER, "%s: cannot open (%s); check the path (relative paths are from the "
                       "directory trainer runs in)", path, strerror(e));
    }
    unsigned char magic[2] = { 0, 0 };
    ssize_t got;
    do got = read(r->fd, magic, 2);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        int e = errno;
        tr_reader_close(r);
        return tr_fail(err, TR_EUSER, "%s: cannot read (%s)", path, strerror(e));
    }
    r->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (lseek(r->fd, 0, SEEK_SET) != 0) {
        int e = errno;
        tr_reader_close(r);
        return tr_fail(err, TR_EINTERNAL, "%s: lseek failed (%s)", path, strerror(e));
    }
    if (r->gzip) {
        r->gz = gzdopen(r->fd, "rb");   /* owns the descriptor from now on */
        if (!r->gz) {
            tr_reader_close(r);
            return tr_fail(err, TR_EOOM, "%s: out of host memory opening the gzip stream", path);
        }
        r->fd = -1;
        if (gzbuffer(r->gz, GZ_BUFFER) != 0) {
            tr_reader_close(r);
            return tr_fail(err, TR_EINTERNAL, "%s: gzbuffer failed", path);
        }
    }
    if (format != TR_FORMAT_JSONL) {
        int st = read_header(r, err);
        if (st) {
            tr_reader_close(r);
            return st;
        }
    }
    *out = r;
    return TR_OK;
}

void tr_reader_close(tr_reader *r)
{
    if (!r) return;
    if (r->gz) gzclose(r->gz);
    if (r->fd >= 0) close(r->fd);
    for (int32_t i = 0; i < r->ncols; i++) free(r->cols[i]);
    free(r->cols);
    free(r->path);
    free(r->buf);
    free(r->line);
    free(r->fbuf);
    free(r->foff);
    free(r->flen);
    free(r->fptr);
    free(r);
}

int32_t tr_reader_is_gzip(const tr_reader *r) { return r->gzip; }
int32_t tr_reader_ncolumns(const tr_reader *r) { return r->ncols; }

const char *tr_reader_column(const tr_reader *r, int32_t i)
{
    return i >= 0 && i < r->ncols ? r->cols[i] : NULL;
}

/* ------------------------------------------------------------ records */

int tr_reader_next(tr_reader *r, tr_record *rec, tr_error *err)
{
    memset(rec, 0, sizeof *rec);
    if (r->fatal.status) return tr_fail(err, r->fatal.status, "%s", r->fatal.msg);
    int got = 0;
    int st = read_nonblank(r, rec, &got, err);
    rec->lineno = r->lineno;
    rec->offset = r->line_offset;
    if (st) return st;
    if (!got) {
        rec->eof = 1;
        return TR_OK;
    }
    if (r->format == TR_FORMAT_JSONL) {
        rec->text = r->line;
        rec->len = r->line_len;
        return TR_OK;
    }
    st = r->format == TR_FORMAT_TSV ? split_tsv(r, err) : split_csv(r, rec, err);
    if (st) return st;
    if (r->nf != r->ncols) {
        char names[512];
        size_t k = 0;
        names[0] = 0;
        for (int32_t i = 0; i < r->ncols && k + 4 < sizeof names; i++) {
            int w = snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", r->cols[i]);
            if (w < 0) break;
            k += (size_t)w;
        }
        return fail_record(rec, err, "%s: line %lld: %d fields, but the header has %d (%s)%s",
                           r->path, (long long)rec->lineno, (int)r->nf, (int)r->ncols, names,
                           r->format == TR_FORMAT_TSV ? "; TSV fields are split on every tab and cannot be quoted"
                                                      : "; quote a field that contains a comma");
    }
    fields_publish(r, rec);
    return TR_OK;
}

int tr_reader_seek(tr_reader *r, int64_t offset, int64_t lineno, tr_error *err)
{
    if (r->fatal.status) return tr_fail(err, r->fatal.status, "%s", r->fatal.msg);
    if (r->gzip)
        return tr_fail(err, TR_EUSER, "%s: cannot seek in a gzip file (it would decompress from the start); "
                       "stream it instead", r->path);
    if (offset < 0 || lineno < 1)
        return tr_fail(err, TR_EUSER, "%s: bad seek target (offset %lld, line %lld)", r->path, (long long)offset,
                       (long long)lineno);
    if (lseek(r->fd, (off_t)offset, SEEK_SET) < 0)
        return fail_fatal(r, NULL, err, TR_EINTERNAL, "%s: seek to byte %lld failed: %s", r->path,
                          (long long)offset, strerror(errno));
    r->chunk = SEEK_CHUNK;
    r->beg = r->end = 0;
    r->at_eof = 0;
    r->pos = offset;
    r->lineno = lineno - 1;
    return TR_OK;
}
