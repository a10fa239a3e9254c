/* fuzz_reader.c — libFuzzer target: any bytes as a training data file, read record by
 * record; built three times: fuzz_reader_jsonl, fuzz_reader_tsv, fuzz_reader_csv
 * (-DFUZZ_FORMAT=0/1/2). A malformed record is TR_EUSER with malformed = 1 and the
 * reader goes on; any other failure is fatal and stays so; records point at valid
 * memory; a record reread after a seek to its offset is the same record. */
#include "fuzz.h"
#include "reader.h"

#ifndef FUZZ_FORMAT
#define FUZZ_FORMAT 0
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("data.txt", data, size);
    tr_error err;
    tr_error_clear(&err);
    tr_reader *r = NULL;
    int rc = tr_reader_open(&r, path, FUZZ_FORMAT, 4096, &err);
    if (rc != TR_OK) {
        if (rc != TR_EUSER && rc != TR_EOOM) FUZZ_FAIL("open: status %d: %s", rc, err.msg);
        if (r) FUZZ_FAIL("reader set on failure");
        return 0;
    }
    int gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    for (int n = 0; n < 100000; n++) {
        tr_record rec;
        memset(&rec, 0, sizeof rec);
        tr_error_clear(&err);
        rc = tr_reader_next(r, &rec, &err);
        if (rc != TR_OK) {
            if (rc != TR_EUSER && rc != TR_EOOM) FUZZ_FAIL("next: status %d: %s", rc, err.msg);
            if (!rec.malformed) break;
            continue;
        }
        if (rec.eof) break;
        volatile uint8_t sum = 0;
        if (FUZZ_FORMAT == TR_FORMAT_JSONL) {
            for (size_t i = 0; i < rec.len; i++) sum ^= (uint8_t)rec.text[i];
            if (rec.text[rec.len] != 0) FUZZ_FAIL("line not NUL-terminated");
        } else {
            for (int32_t f = 0; f < rec.nfields; f++)
                for (size_t i = 0; i <= rec.field_len[f]; i++) sum ^= (uint8_t)rec.fields[f][i];
        }
        (void)sum;
        if (!gzip && n % 7 == 0) {
            int64_t lineno = rec.lineno, offset = rec.offset;
            size_t len = rec.len;
            int32_t nfields = rec.nfields;
            if (tr_reader_seek(r, offset, lineno, &err) != TR_OK) FUZZ_FAIL("seek to a record's offset: %s", err.msg);
            tr_record again;
            memset(&again, 0, sizeof again);
            if (tr_reader_next(r, &again, &err) != TR_OK) FUZZ_FAIL("reread after seek failed: %s", err.msg);
            if (again.lineno != lineno || again.len != len || again.nfields != nfields)
                FUZZ_FAIL("reread after seek differs (line %lld)", (long long)lineno);
        }
    }
    tr_reader_close(r);
    return 0;
}
