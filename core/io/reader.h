/* reader.h — streaming readers for training data: JSON Lines, TSV and CSV, each plain or
 * gzip-compressed, read record by record with bounded memory.
 *
 * A file whose first bytes are the gzip magic (1f 8b) is streamed through zlib's gz*
 * API; any other file is read as plain text, so "data.jsonl" holding gzip bytes and
 * "data.jsonl.gz" holding plain text both work (the name is never consulted). Offsets
 * are byte offsets in the uncompressed stream. tr_reader_seek is cheap on plain files (an lseek) and refused on
 * gzip files: random access into a gzip stream would decompress from the start, so the
 * data layer streams gzip files once per epoch through a shuffle buffer instead and keeps
 * an offset index (tr_row_index) only for plain files.
 *
 * Records:
 *   JSONL: one non-blank line; text is the line (not parsed here: the Lua side decodes it
 *          with jansson). Blank and whitespace-only lines are skipped.
 *   TSV:   header row required; fields split on every tab, no quoting, no escapes.
 *   CSV:   header row required; RFC 4180: fields split on commas, a field may be quoted
 *          with '"', a doubled quote inside quotes is one quote, a quoted field may span
 *          lines (its line ends become "\n"). A quote inside an unquoted field is kept
 *          literally; text between a closing quote and the next comma is an error.
 *   All:   a UTF-8 byte-order mark at the start of the file is dropped; a line ends at
 *          LF, and a CR before the LF is dropped (CRLF files read like LF files); a last
 *          line without a line end is a line. Blank lines are skipped in all formats.
 *          A TSV/CSV row with a different number of fields than the header is malformed.
 *
 * Errors name the file and the 1-based line number. A malformed record (wrong field
 * count, bad quoting, over-long line) returns TR_EUSER with rec->malformed = 1, and the
 * reader stays usable: the next call reads the record after it (the caller may skip and
 * count it). Any other failure (I/O error, truncated or corrupt gzip) is fatal: it
 * returns an error with rec->malformed = 0, and every later call fails the same way. */
#ifndef TR_READER_H
#define TR_READER_H

#include "tr_base.h"

typedef enum tr_data_format {
    TR_FORMAT_JSONL = 0,
    TR_FORMAT_TSV = 1,
    TR_FORMAT_CSV = 2
} tr_data_format;

typedef struct tr_reader tr_reader;

/* One record; its pointers stay valid until the next tr_reader_next/seek/close. */
typedef struct tr_record {
    int64_t lineno;           /* 1-based line of the record's first line */
    int64_t offset;           /* byte offset of that line: tr_reader_seek(r, offset, lineno) rereads it */
    const char *text;         /* JSONL: the line, NUL-terminated, without its line end; else NULL */
    size_t len;               /* bytes of text */
    int32_t nfields;          /* TSV/CSV: fields of the row (== the header's); JSONL: 0 */
    const char **fields;      /* TSV/CSV: NUL-terminated fields (may contain NULs: use field_len) */
    const size_t *field_len;
    int32_t eof;              /* 1 when no record was read: the end of the file */
    int32_t malformed;        /* 1 when the error concerns this record only (see above) */
} tr_record;

/* Opens path for records of the given format; TSV/CSV read the header row now. The
 * longest line accepted is max_line bytes (0: 64 MiB), so a binary file fails fast
 * instead of growing a buffer. On error *out is NULL. */
int tr_reader_open(tr_reader **out, const char *path, int32_t format, size_t max_line, tr_error *err);
void tr_reader_close(tr_reader *r);

/* 1 when the file is gzip-compressed (seek refused), 0 when plain. */
int32_t tr_reader_is_gzip(const tr_reader *r);
/* TSV/CSV: the header's column count and names (0 and NULL for JSONL). */
int32_t tr_reader_ncolumns(const tr_reader *r);
const char *tr_reader_column(const tr_reader *r, int32_t i);

/* Reads the next record into *rec. TR_OK with rec->eof = 1 at the end of the file. */
int tr_reader_next(tr_reader *r, tr_record *rec, tr_error *err);

/* Positions the reader at a record start returned earlier in rec->offset (with its
 * lineno, so later line numbers stay right). Plain files only: TR_EUSER on gzip. */
int tr_reader_seek(tr_reader *r, int64_t offset, int64_t lineno, tr_error *err);

/* ------------------------------------------------------------ offset index */

/* A growable list of record starts (offset, line) of a plain file, plus an order over
 * them: 16 bytes per record, outside the Lua heap. */
typedef struct tr_row_index tr_row_index;

int tr_row_index_new(tr_row_index **out, tr_error *err);
void tr_row_index_free(tr_row_index *ix);
int tr_row_index_push(tr_row_index *ix, int64_t offset, int64_t lineno, tr_error *err);
int64_t tr_row_index_count(const tr_row_index *ix);
/* Record i (0-based, in push order); -1 when i is out of range. */
int64_t tr_row_index_offset(const tr_row_index *ix, int64_t i);
int64_t tr_row_index_lineno(const tr_row_index *ix, int64_t i);
/* Sets the order: shuffled (tr_shuffle_perm with seed, epoch, purpose) when shuffle is
 * non-zero, else push order. */
int tr_row_index_set_order(tr_row_index *ix, int32_t shuffle, uint64_t seed, uint32_t epoch, uint32_t purpose,
                           tr_error *err);
/* The record index at position i of the order; -1 when out of range. */
int64_t tr_row_index_order(const tr_row_index *ix, int64_t i);

/* ------------------------------------------------------------ seeded shuffling */

/* Uniform integer in [0, n) (n >= 1), a pure function of (seed, epoch, purpose,
 * counter): Philox-4x32-10 (core/base/rng.h) with key = seed, counter block
 * { epoch, purpose, counter low 32 bits, counter high 32 bits }, words w0, w1 ->
 * u = (w0 * 2^21 + (w1 >> 11)) / 2^53 in [0, 1), result floor(u * n). The same on every
 * machine; lua/trainer/train/data.lua draws through it. */
int64_t tr_shuffle_below(uint64_t seed, uint32_t epoch, uint32_t purpose, uint64_t counter, int64_t n);

/* perm[0..n) = a Fisher-Yates shuffle of 0..n-1: for i = n-1 down to 1, swap perm[i]
 * with perm[j], j = tr_shuffle_below(seed, epoch, purpose, n-1-i, i+1). */
void tr_shuffle_perm(int64_t *perm, int64_t n, uint64_t seed, uint32_t epoch, uint32_t purpose);

#endif
