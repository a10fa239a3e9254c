/* test_safetensors.c — safetensors reading and writing: the golden file written by the
 * reference Python package (tests/ref/make_safetensors_golden.py) read correctly and
 * rewritten byte for byte, round trips, every validation failure with its message,
 * sharded folders read and written. Run from the repository root. */
#include "check.h"
#include "file_check.h"
#include "trainer.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN "tests/data/safetensors/golden.safetensors"
#define SHARDED "tests/data/safetensors/sharded"

/* ------------------------------------------------------------ helpers */

static char tmpdir[64];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

static void tmp_begin(void)
{
    strcpy(tmpdir, "/tmp/tr_st_test_XXXXXX");
    if (!mkdtemp(tmpdir)) tmpdir[0] = '\0';
}

static void tmp_end(void) { nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS); }

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* A raw file: length field HLEN (or the header's length when HLEN is UINT64_MAX), the
 * header text, then DATA_LEN bytes 0..255 repeating. */
static void raw_file(const char *path, const char *header, uint64_t hlen, size_t data_len)
{
    size_t h = strlen(header);
    if (hlen == UINT64_MAX) hlen = h;
    uint8_t *b = calloc(8 + h + data_len + 1, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
    fc_spit(path, b, 8 + h + data_len);
    free(b);
}

/* ------------------------------------------------------------ dtypes */

static void test_dtypes(void)
{
    CHECK(tr_st_dtype_bits("F32") == 32 && tr_st_dtype_bits("BF16") == 16, "bits");
    CHECK(tr_st_dtype_bits("F4") == 4 && tr_st_dtype_bits("F6_E3M2") == 6, "sub-byte bits");
    CHECK(tr_st_dtype_bits("C64") == 64 && tr_st_dtype_bits("BOOL") == 8, "C64, BOOL");
    CHECK(tr_st_dtype_bits("f32") == 0 && tr_st_dtype_bits("") == 0, "unknown names");
    CHECK(tr_st_dtype_to_tr("BF16") == TR_BF16 && tr_st_dtype_to_tr("I64") == TR_I64 &&
              tr_st_dtype_to_tr("F16") == TR_F16 && tr_st_dtype_to_tr("I32") == TR_I32 &&
              tr_st_dtype_to_tr("F32") == TR_F32, "runtime dtypes");
    CHECK(tr_st_dtype_to_tr("F64") == -1 && tr_st_dtype_to_tr("F8_E4M3") == -1 &&
              tr_st_dtype_to_tr("nope") == -1, "no runtime dtype");
    for (int d = 0; d < TR_NDTYPES; d++) {
        const char *n = tr_st_dtype_from_tr(d);
        CHECK(n && tr_st_dtype_to_tr(n) == d, "dtype %d round trip", d);
    }
    CHECK(tr_st_dtype_from_tr(TR_NDTYPES) == NULL && tr_st_dtype_from_tr(-1) == NULL, "bad");
    /* The reference order, checked against safetensors 0.8.0's writer. */
    const char *order[] = { "BOOL", "F4", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                            "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32",
                            "U32", "F32", "C64", "F64", "I64", "U64" };
    for (int i = 1; i < 20; i++)
        CHECK(tr_st_dtype_order(order[i - 1]) < tr_st_dtype_order(order[i]), "%s < %s",
              order[i - 1], order[i]);
    CHECK(tr_st_dtype_order("X") == -1, "unknown order");
}

/* ------------------------------------------------------------ golden */

static void test_golden_read(void)
{
    tr_error err;
    tr_error_clear(&err);
    tr_st_file *f = NULL;
    int rc = tr_st_open(&f, GOLDEN, &err);
    CHECK(rc == TR_OK, "open: %s", err.msg);
    if (rc) return;
    CHECK(tr_st_count(f) == 12, "count %zu", tr_st_count(f));
    CHECK(tr_st_metadata_count(f) == 1, "metadata count");
    const char *fmt = tr_st_metadata(f, "format");
    CHECK(fmt && strcmp(fmt, "pt") == 0, "format");
    CHECK(tr_st_metadata(f, "nope") == NULL, "absent metadata");

    tr_st_info t;
    CHECK(tr_st_get(f, 0, &t) == TR_OK && strcmp(t.name, "position_ids") == 0,
          "file order starts with the widest dtype");
    CHECK(tr_st_get(f, 12, &t) == TR_EUSER, "out of range");

    size_t flen;
    uint8_t *bytes = fc_slurp(GOLDEN, &flen);
    for (size_t i = 0; i < tr_st_count(f); i++) {
        tr_st_get(f, i, &t);
        CHECK(t.offset + t.nbytes <= flen, "tensor %s past the end", t.name);
        CHECK(bytes && memcmp((const uint8_t *)t.data, bytes + t.offset, t.nbytes) == 0,
              "data pointer of %s", t.name);
        CHECK(tr_st_find(f, t.name) == (int64_t)i, "find %s", t.name);
    }
    free(bytes);

    CHECK(tr_st_lookup(f, "position_ids", &t, &err) == TR_OK, "%s", err.msg);
    int64_t ids[4];
    memcpy(ids, t.data, sizeof ids);
    CHECK(t.dtype == TR_I64 && strcmp(t.dtype_name, "I64") == 0, "I64 dtype");
    CHECK(t.ndim == 2 && t.shape[0] == 1 && t.shape[1] == 4 && t.numel == 4, "shape");
    CHECK(ids[0] == -2 && ids[1] == 0 && ids[2] == 7 && ids[3] == (int64_t)1 << 40, "ids");

    CHECK(tr_st_lookup(f, "encoder.layer.0.weight", &t, &err) == TR_OK, "%s", err.msg);
    float w[6];
    memcpy(w, t.data, sizeof w);
    CHECK(t.dtype == TR_F32 && t.nbytes == 24, "weight");
    for (int i = 0; i < 6; i++) CHECK(w[i] == i * 0.5f - 1.0f, "w[%d] = %g", i, w[i]);

    CHECK(tr_st_lookup(f, "double", &t, &err) == TR_OK, "%s", err.msg);
    double d;
    memcpy(&d, t.data, 8);
    CHECK(t.dtype == -1 && strcmp(t.dtype_name, "F64") == 0 && d == 3.14159265358979311600,
          "F64 has no runtime dtype; value %.17g", d);

    CHECK(tr_st_lookup(f, "embeddings.half", &t, &err) == TR_OK, "%s", err.msg);
    uint16_t h[4];
    memcpy(h, t.data, sizeof h);
    CHECK(t.dtype == TR_F16 && h[0] == 0x3C00 && h[1] == 0xC000 && h[2] == 0x3800 &&
          h[3] == 0x7BFF, "f16 bits");

    CHECK(tr_st_lookup(f, "scalar", &t, &err) == TR_OK, "%s", err.msg);
    float s;
    memcpy(&s, t.data, 4);
    CHECK(t.ndim == 0 && t.numel == 1 && t.nbytes == 4 && s == 42.0f, "0-d tensor");

    CHECK(tr_st_lookup(f, "empty", &t, &err) == TR_OK, "%s", err.msg);
    CHECK(t.ndim == 2 && t.shape[0] == 0 && t.shape[1] == 3 && t.numel == 0 && t.nbytes == 0,
          "empty tensor");

    CHECK(tr_st_lookup(f, "pooler.v\xc3\xa6gt", &t, &err) == TR_OK, "UTF-8 name: %s", err.msg);
    CHECK(tr_st_lookup(f, "ctl\x1bname", &t, &err) == TR_OK, "escaped name: %s", err.msg);
    int16_t c[2];
    memcpy(c, t.data, sizeof c);
    CHECK(t.dtype == -1 && c[0] == 1 && c[1] == 2, "I16");

    CHECK(tr_st_lookup(f, "mask", &t, &err) == TR_OK, "%s", err.msg);
    const uint8_t *m = t.data;
    CHECK(strcmp(t.dtype_name, "BOOL") == 0 && m[0] == 1 && m[1] == 0 && m[2] == 1, "mask");

    CHECK(tr_st_lookup(f, "bytes", &t, &err) == TR_OK, "%s", err.msg);
    const uint8_t *u = t.data;
    CHECK(t.nbytes == 5 && u[0] == 0 && u[4] == 4, "U8");

    CHECK(tr_st_lookup(f, "token_type", &t, &err) == TR_OK, "%s", err.msg);
    int32_t tt[2];
    memcpy(tt, t.data, sizeof tt);
    CHECK(t.dtype == TR_I32 && tt[0] == 3 && tt[1] == -4, "I32");

    tr_error_clear(&err);
    CHECK(tr_st_lookup(f, "missing.weight", &t, &err) == TR_EUSER &&
              strstr(err.msg, GOLDEN) && strstr(err.msg, "missing.weight"),
          "lookup miss: %s", err.msg);
    CHECK(tr_st_find(f, "missing.weight") == -1, "find miss");
    tr_st_close(f);
}

/* The golden file's tensors, given to tr_st_write in reversed order, come out identical
 * to the reference writer's bytes. */
static void test_golden_rewrite_identical(void)
{
    tr_error err;
    tr_error_clear(&err);
    tr_st_file *f = NULL;
    CHECK(tr_st_open(&f, GOLDEN, &err) == TR_OK, "open: %s", err.msg);
    if (!f) return;
    size_t n = tr_st_count(f);
    tr_st_entry *e = calloc(n, sizeof *e);
    for (size_t i = 0; i < n; i++) {
        tr_st_info t;
        tr_st_get(f, i, &t);
        tr_st_entry *x = &e[n - 1 - i];
        x->name = t.name;
        x->dtype = t.dtype_name;
        x->ndim = t.ndim;
        memcpy(x->shape, t.shape, sizeof x->shape);
        x->data = t.data;
    }
    tmp_begin();
    const char *out = tmp_path("rewrite.safetensors");
    int rc = tr_st_write(out, e, n, NULL, 0, &err);
    CHECK(rc == TR_OK, "write: %s", err.msg);
    size_t a_len = 0, b_len = 0;
    uint8_t *a = fc_slurp(GOLDEN, &a_len), *b = fc_slurp(out, &b_len);
    CHECK(a && b && a_len == b_len, "sizes %zu vs %zu", a_len, b_len);
    if (a && b && a_len == b_len) {
        size_t k = 0;
        while (k < a_len && a[k] == b[k]) k++;
        CHECK(k == a_len, "first difference at byte %zu", k);
    }
    CHECK(!exists(tmp_path("rewrite.safetensors.tmp")), "tmp file left");
    free(a);
    free(b);
    free(e);
    tr_st_close(f);
    tmp_end();
}

/* ------------------------------------------------------------ round trip */

static void test_roundtrip(void)
{
    tr_error err;
    tr_error_clear(&err);
    tmp_begin();
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)i / 3.0f - 1.5f;
    uint16_t bf[5];
    for (int i = 0; i < 5; i++) {   /* bf16 = the top half of the f32 (exact here) */
        float x = (float)i * 1.25f;
        uint32_t u;
        memcpy(&u, &x, 4);
        bf[i] = (uint16_t)(u >> 16);
    }
    int64_t ids[3] = { 5, -6, 7 };
    uint8_t f4[2] = { 0x12, 0x34 };   /* four F4 values */
    tr_st_entry e[] = {
        { .name = "z.weight", .dtype = "F32", .ndim = 3, .shape = { 2, 3, 2 }, .data = w },
        { .name = "a.bf16", .dtype = tr_st_dtype_from_tr(TR_BF16), .ndim = 1, .shape = { 5 },
          .data = bf },
        { .name = "ids", .dtype = "I64", .ndim = 1, .shape = { 3 }, .data = ids },
        { .name = "nothing", .dtype = "F32", .ndim = 1, .shape = { 0 }, .data = NULL },
        { .name = "packed", .dtype = "F4", .ndim = 1, .shape = { 4 }, .data = f4 },
    };
    const char *meta[] = { "step", "200", "note", "r\xc3\xb8" "d" };
    const char *path = tmp_path("rt.safetensors");
    int rc = tr_st_write(path, e, 5, meta, 2, &err);
    CHECK(rc == TR_OK, "write: %s", err.msg);
    size_t len;
    uint8_t *raw = fc_slurp(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; raw && i >= 0; i--) hlen = (hlen << 8) | raw[i];
    CHECK(raw && hlen % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hlen);
    CHECK(raw && memcmp(raw + 8, "{\"__metadata__\":{\"format\":\"pt\",\"step\":\"200\"", 43) == 0,
          "header starts with the metadata, format first");
    CHECK(raw && raw[8 + hlen - 1] != '\n', "no newline in the header");
    free(raw);

    tr_st_file *f = NULL;
    rc = tr_st_open(&f, path, &err);
    CHECK(rc == TR_OK, "reopen: %s", err.msg);
    if (!f) {
        tmp_end();
        return;
    }
    CHECK(tr_st_count(f) == 5, "count");
    CHECK(strcmp(tr_st_metadata(f, "format"), "pt") == 0, "format pt");
    CHECK(strcmp(tr_st_metadata(f, "step"), "200") == 0, "step");
    CHECK(strcmp(tr_st_metadata(f, "note"), "r\xc3\xb8" "d") == 0, "note");
    const char *k, *v;
    CHECK(tr_st_metadata_at(f, 0, &k, &v) == TR_OK && strcmp(k, "format") == 0, "first key");
    /* Reference order: I64 (widest), F32 (nothing, z.weight by name), BF16, F4. */
    const char *order[] = { "ids", "nothing", "z.weight", "a.bf16", "packed" };
    for (size_t i = 0; i < 5; i++) {
        tr_st_info t;
        tr_st_get(f, i, &t);
        CHECK(strcmp(t.name, order[i]) == 0, "position %zu: %s", i, t.name);
    }
    for (size_t i = 0; i < 5; i++) {
        tr_st_info t;
        CHECK(tr_st_lookup(f, e[i].name, &t, &err) == TR_OK, "%s", err.msg);
        CHECK(strcmp(t.dtype_name, e[i].dtype) == 0 && t.ndim == e[i].ndim, "%s", e[i].name);
        for (int d = 0; d < t.ndim; d++) CHECK(t.shape[d] == e[i].shape[d], "shape");
        CHECK(t.nbytes == 0 || memcmp(t.data, e[i].data, t.nbytes) == 0, "bytes of %s", t.name);
    }
    tr_st_info t;
    tr_st_lookup(f, "a.bf16", &t, &err);
    CHECK(t.dtype == TR_BF16 && t.nbytes == 10, "bf16");
    tr_st_lookup(f, "packed", &t, &err);
    CHECK(t.dtype == -1 && t.nbytes == 2 && t.numel == 4, "F4 packs two per byte");
    tr_st_close(f);

    /* Writing over an existing file replaces it whole. */
    rc = tr_st_write(path, e, 1, NULL, 0, &err);
    CHECK(rc == TR_OK, "overwrite: %s", err.msg);
    CHECK(tr_st_open(&f, path, &err) == TR_OK && tr_st_count(f) == 1, "overwritten");
    tr_st_close(f);
    CHECK(!exists(tmp_path("rt.safetensors.tmp")), "tmp file left");
    tmp_end();
}

static void test_write_errors(void)
{
    tr_error err;
    tmp_begin();
    float x[4] = { 0 };
    const char *path = tmp_path("bad.safetensors");
    fc_spit(path, "old", 3);
    struct {
        tr_st_entry e[2];
        size_t n;
        const char *want;
    } cases[] = {
        { { { "a", "F32", 1, { 4 }, x }, { "a", "I32", 1, { 4 }, x } }, 2, "two tensors" },
        { { { "a", "F33", 1, { 4 }, x } }, 1, "unknown safetensors dtype 'F33'" },
        { { { "a", "F32", 9, { 4 }, x } }, 1, "ndim 9" },
        { { { "a", "F32", 1, { -4 }, x } }, 1, "negative" },
        { { { "a", "F32", 1, { 4 }, NULL } }, 1, "data is NULL" },
        { { { "", "F32", 1, { 4 }, x } }, 1, "no name" },
        { { { "__metadata__", "F32", 1, { 4 }, x } }, 1, "reserves" },
        { { { "bad\xff", "F32", 1, { 4 }, x } }, 1, "not valid UTF-8" },
        { { { "a", "F4", 1, { 3 }, x } }, 1, "whole number of bytes" },
        { { { "a", "F32", 2, { INT64_MAX, 4 }, x } }, 1, "overflow" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tr_error_clear(&err);
        int rc = tr_st_write(path, cases[i].e, cases[i].n, NULL, 0, &err);
        CHECK(rc == TR_EUSER && strstr(err.msg, cases[i].want) && strstr(err.msg, path),
              "case %zu: rc %d: %s", i, rc, err.msg);
    }
    const char *meta[] = { "k", "bad\xfe" };
    tr_st_entry ok = { "a", "F32", 1, { 4 }, x };
    CHECK(tr_st_write(path, &ok, 1, meta, 1, &err) == TR_EUSER && strstr(err.msg, "metadata"),
          "bad metadata: %s", err.msg);
    size_t len;
    uint8_t *old = fc_slurp(path, &len);
    CHECK(old && len == 3 && memcmp(old, "old", 3) == 0, "existing file untouched");
    free(old);
    CHECK(!exists(tmp_path("bad.safetensors.tmp")), "tmp file left");

    /* A write that fails half-way (the file size limit stands in for a full disk): the
     * old file stays, no PATH.tmp remains, the status is TR_EINTERNAL. */
    static float big[4096];
    tr_st_entry large = { "big", "F32", 1, { 4096 }, big };
    struct rlimit old_lim, lim;
    if (getrlimit(RLIMIT_FSIZE, &old_lim) == 0) {
        void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
        lim = old_lim;
        lim.rlim_cur = 1024;
        setrlimit(RLIMIT_FSIZE, &lim);
        tr_error_clear(&err);
        int rc = tr_st_write(path, &large, 1, NULL, 0, &err);
        setrlimit(RLIMIT_FSIZE, &old_lim);
        signal(SIGXFSZ, old_handler);
        CHECK(rc == TR_EINTERNAL && strstr(err.msg, path) && strstr(err.msg, "disk space"),
              "rc %d: %s", rc, err.msg);
        old = fc_slurp(path, &len);
        CHECK(old && len == 3 && memcmp(old, "old", 3) == 0, "existing file untouched");
        free(old);
        CHECK(!exists(tmp_path("bad.safetensors.tmp")), "tmp file left after a failed write");
    }

    const char *nodir = tmp_path("no/such/dir/x.safetensors");
    tr_error_clear(&err);
    CHECK(tr_st_write(nodir, &ok, 1, NULL, 0, &err) == TR_EUSER && strstr(err.msg, "cannot create"),
          "missing folder: %s", err.msg);
    tmp_end();
}

/* ------------------------------------------------------------ validation */

static void expect_fail(const char *path, const char *want)
{
    tr_error err;
    tr_error_clear(&err);
    tr_st_file *f = (tr_st_file *)1;
    int rc = tr_st_open(&f, path, &err);
    CHECK(rc == TR_EUSER && f == NULL, "expected failure '%s', got rc %d", want, rc);
    CHECK(strstr(err.msg, path) == err.msg, "message should start with the path: %s", err.msg);
    CHECK(strstr(err.msg, want), "expected '%s' in: %s", want, err.msg);
    if (rc == TR_OK) tr_st_close(f);
}

static void test_validation_errors(void)
{
    tmpdir[0] = 0;
    tmp_begin();
    const char *p = tmp_path("v.safetensors");
#define T(json) "{\"t\":{\"dtype\":\"F32\",\"shape\":" json "}}"

    fc_spit(p, "\x08\0\0", 3);
    expect_fail(p, "shorter than the 8-byte");
    fc_spit(p, "", 0);
    expect_fail(p, "is 0 bytes");
    /* Each header, length field and data length, and what the error names. */
    static const struct {
        const char *header;
        uint64_t hlen;
        size_t data_len;
        const char *want;
    } bad[] = {
        { "{}", 100000001ull, 0, "above the format's limit" },
        { "{}", UINT64_MAX - 3, 0, "above the format's limit" },
        { "{}      ", 4096, 0, "truncated download?" },
        { "{\"\xc3\x28\":1}", UINT64_MAX, 0, "not valid UTF-8" },
        { "{\"\xed\xa0\x80\":1}", UINT64_MAX, 0, "not valid UTF-8" }, /* a UTF-16 surrogate */
        { "[]", UINT64_MAX, 0, "does not start with '{'" },
        { "        ", UINT64_MAX, 0, "does not start with '{'" },
        { "{\"t\":", UINT64_MAX, 0, "not valid JSON" },
        { "{} {}", UINT64_MAX, 0, "not valid JSON" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", UINT64_MAX, 8, "duplicate" },
        { "{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", UINT64_MAX, 8, "unknown dtype 'F33'" },
        { "{\"t\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", UINT64_MAX, 8, "dtype is not a string" },
        { "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", UINT64_MAX, 8, "lacks 'dtype'" },
        { "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", UINT64_MAX, 8, "lacks 'shape'" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", UINT64_MAX, 8, "lacks 'data_offsets'" },
        { "{\"t\":[1,2]}", UINT64_MAX, 8, "not an object" },
        { T("[2],\"data_offsets\":[0,16]"), UINT64_MAX, 16, "make 8 bytes but data_offsets [0, 16] hold 16" },
        { T("[-2],\"data_offsets\":[0,8]"), UINT64_MAX, 8, "shape[0] is not a non-negative integer" },
        { T("[2.0],\"data_offsets\":[0,8]"), UINT64_MAX, 8, "shape[0] is not a non-negative integer" },
        { T("\"2\",\"data_offsets\":[0,8]"), UINT64_MAX, 8, "shape is not an array" },
        { T("[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]"), UINT64_MAX, 8, "at most 8" },
        { T("[4294967296,4294967296,16],\"data_offsets\":[0,8]"), UINT64_MAX, 8, "overflows 64 bits" },
        { T("[99999999999999999999],\"data_offsets\":[0,8]"), UINT64_MAX, 8, "not valid JSON" },
        { T("[2],\"data_offsets\":[8,0]"), UINT64_MAX, 8, "end before they begin" },
        { T("[2],\"data_offsets\":[0]"), UINT64_MAX, 8, "not a pair" },
        { T("[2],\"data_offsets\":[0,-8]"), UINT64_MAX, 8, "not a pair" },
        { T("[2],\"data_offsets\":[8,16]"), UINT64_MAX, 16, "do not start at 0" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"encoder.layer.3.output.dense.weight\":{\"dtype\":\"F32\",\"shape\":[2],"
          "\"data_offsets\":[12,20]}}", UINT64_MAX, 20,
          "tensor 'encoder.layer.3.output.dense.weight': data_offsets [12, 20] do not follow the previous tensor's end 8" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", UINT64_MAX, 12, "tensors overlap" },
        { T("[2],\"data_offsets\":[0,8]"), UINT64_MAX, 4, "but the header says the data ends at" },
        { T("[2],\"data_offsets\":[0,8]"), UINT64_MAX, 4, "(truncated download?)" },
        { T("[2],\"data_offsets\":[0,8]"), UINT64_MAX, 9, "bytes follow the last tensor" },
        { "{\"__metadata__\":{\"format\":1}}", UINT64_MAX, 0, "__metadata__ value for 'format' is not a string" },
        { "{\"__metadata__\":[1]}", UINT64_MAX, 0, "__metadata__ is not an object" },
        { "{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", UINT64_MAX, 2, "not a whole number of bytes" },
        { "{\"t\\u0000x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", UINT64_MAX, 8, "not valid JSON" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw_file(p, bad[i].header, bad[i].hlen, bad[i].data_len);
        expect_fail(p, bad[i].want);
    }
    {   /* 100,000 nested arrays: jansson's depth limit, not the stack, stops it */
        size_t depth = 100000;
        char *deep = malloc(depth + 8);
        memcpy(deep, "{\"a\":", 5);
        memset(deep + 5, '[', depth);
        deep[5 + depth] = '\0';
        raw_file(p, deep, UINT64_MAX, 0);
        free(deep);
        expect_fail(p, "not valid JSON");
    }
    expect_fail(tmpdir, "not a regular file");
    expect_fail(tmp_path("absent.safetensors"), "cannot open");

    /* Valid edge cases: no tensors; trailing padding; a null __metadata__; unknown keys. */
    tr_error err;
    tr_st_file *f = NULL;
    raw_file(p, "{}      ", UINT64_MAX, 0);
    CHECK(tr_st_open(&f, p, &err) == TR_OK && tr_st_count(f) == 0, "empty: %s", err.msg);
    tr_st_close(f);
    raw_file(p, " \n{}", UINT64_MAX, 0);   /* the reference reader accepts this too */
    CHECK(tr_st_open(&f, p, &err) == TR_OK && tr_st_count(f) == 0, "leading space: %s", err.msg);
    tr_st_close(f);
    raw_file(p, "{\"__metadata__\":null,\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":"
                "[0,3],\"extra\":1}}", UINT64_MAX, 3);
    CHECK(tr_st_open(&f, p, &err) == TR_OK && tr_st_count(f) == 1 &&
              tr_st_metadata_count(f) == 0, "null metadata, unknown key: %s", err.msg);
    tr_st_close(f);
#undef T
    tmp_end();
}

/* ------------------------------------------------------------ sharded */

static void test_sharded_golden(void)
{
    tr_error err;
    tr_error_clear(&err);
    const char *paths[] = { SHARDED, SHARDED "/model.safetensors.index.json" };
    for (int p = 0; p < 2; p++) {
        tr_st_sharded *s = NULL;
        int rc = tr_st_sharded_open(&s, paths[p], &err);
        CHECK(rc == TR_OK, "open %s: %s", paths[p], err.msg);
        if (rc) continue;
        CHECK(tr_st_sharded_count(s) == 3 && tr_st_sharded_nshards(s) == 2, "counts");
        tr_st_info t;
        CHECK(tr_st_sharded_lookup(s, "layer.1.w", &t, &err) == TR_OK, "%s", err.msg);
        int64_t v[3];
        memcpy(v, t.data, sizeof v);
        CHECK(t.shard == 1 && t.dtype == TR_I64 && v[0] == 0 && v[2] == 2, "layer.1.w");
        const tr_st_file *sh = tr_st_sharded_shard(s, (size_t)t.shard);
        CHECK(sh && strstr(tr_st_path(sh), "model-00002-of-00002") &&
                  strcmp(tr_st_metadata(sh, "format"), "pt") == 0, "shard file");
        CHECK(tr_st_sharded_lookup(s, "layer.0.w", &t, &err) == TR_OK, "%s", err.msg);
        float w[4];
        memcpy(w, t.data, sizeof w);
        CHECK(t.shard == 0 && w[3] == 3.0f, "layer.0.w");
        int64_t i = tr_st_sharded_find(s, "layer.0.b");
        CHECK(i >= 0 && tr_st_sharded_get(s, (size_t)i, &t) == TR_OK &&
                  strcmp(t.name, "layer.0.b") == 0, "find/get");
        CHECK(tr_st_sharded_find(s, "nope") == -1, "find miss");
        CHECK(tr_st_sharded_lookup(s, "nope", &t, &err) == TR_EUSER && strstr(err.msg, "nope") &&
                  strstr(err.msg, paths[p]) == err.msg, "lookup miss: %s", err.msg);
        for (size_t k = 0; k < tr_st_sharded_count(s); k++) {
            tr_st_sharded_get(s, k, &t);
            CHECK(tr_st_sharded_find(s, t.name) == (int64_t)k, "find %s", t.name);
        }
        CHECK(tr_st_sharded_get(s, 3, &t) == TR_EUSER, "get out of range");
        CHECK(tr_st_sharded_shard(s, 2) == NULL, "shard out of range");
        tr_st_sharded_close(s);
    }
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = fc_slurp(from, &n);
    if (b) fc_spit(to, b, n);
    free(b);
}

static void expect_sharded_fail(const char *path, const char *want1, const char *want2)
{
    tr_error err;
    tr_error_clear(&err);
    tr_st_sharded *s = (tr_st_sharded *)1;
    int rc = tr_st_sharded_open(&s, path, &err);
    CHECK(rc == TR_EUSER && s == NULL && strstr(err.msg, want1) && strstr(err.msg, want2),
          "expected '%s' and '%s', got rc %d: %s", want1, want2, rc, err.msg);
}

static void test_sharded_errors(void)
{
    tmp_begin();
    const char *s1 = "model-00001-of-00002.safetensors";
    copy_file(SHARDED "/model-00001-of-00002.safetensors", tmp_path(s1));
    copy_file(SHARDED "/model.safetensors.index.json", tmp_path("model.safetensors.index.json"));
    expect_sharded_fail(tmpdir, "model-00002-of-00002.safetensors", "layer.1.w");

    const char *idx = tmp_path("model.safetensors.index.json");
    const char *wrong = "{\"weight_map\":{\"layer.1.w\":\"model-00001-of-00002.safetensors\"}}";
    fc_spit(idx, wrong, strlen(wrong));
    expect_sharded_fail(tmpdir, "puts tensor 'layer.1.w' in shard", "no such tensor");
    const char *up = "{\"weight_map\":{\"x\":\"../model-00001-of-00002.safetensors\"}}";
    fc_spit(idx, up, strlen(up));
    expect_sharded_fail(tmpdir, "not a shard file name", "'x'");
    const char *nomap = "{\"metadata\":{}}";
    fc_spit(idx, nomap, strlen(nomap));
    expect_sharded_fail(tmpdir, "weight_map", idx);
    fc_spit(idx, "{", 1);
    expect_sharded_fail(tmpdir, "not a valid index", idx);
    const char *dup = "{\"weight_map\":{\"a\":\"x\",\"a\":\"y\"}}";
    fc_spit(idx, dup, strlen(dup));
    expect_sharded_fail(tmpdir, "duplicate", idx);
    /* A shard that exists but is corrupt: the message names the shard and the reason. */
    const char *bad = "{\"weight_map\":{\"a\":\"broken.safetensors\"}}";
    fc_spit(idx, bad, strlen(bad));
    fc_spit(tmp_path("broken.safetensors"), "\x01\0\0\0\0\0\0\0", 8);
    expect_sharded_fail(tmpdir, "shard 'broken.safetensors'", "truncated");
    remove(idx);
    remove(tmp_path(s1));
    remove(tmp_path("broken.safetensors"));
    expect_sharded_fail(tmpdir, "neither model.safetensors.index.json", "model folder");
    expect_sharded_fail(tmp_path("absent"), "cannot open", "absent");
    tmp_end();
}

static void test_sharded_write(void)
{
    tr_error err;
    tr_error_clear(&err);
    tmp_begin();
    float a[100], b[10], c[30];
    for (int i = 0; i < 100; i++) a[i] = (float)i;
    for (int i = 0; i < 10; i++) b[i] = -(float)i;
    for (int i = 0; i < 30; i++) c[i] = (float)i * 2;
    tr_st_entry e[] = {
        { "b.small", "F32", 1, { 10 }, b },   /* 40 B */
        { "a.big", "F32", 2, { 10, 10 }, a }, /* 400 B: above the limit, a shard of its own */
        { "c.mid", "F32", 1, { 30 }, c },     /* 120 B: 40 + 120 > 150, new shard */
    };
    int rc = tr_st_write_sharded(tmpdir, e, 3, NULL, 0, 150, &err);
    CHECK(rc == TR_OK, "write: %s", err.msg);
    CHECK(exists(tmp_path("model-00001-of-00003.safetensors")) &&
              exists(tmp_path("model-00003-of-00003.safetensors")) &&
              exists(tmp_path("model.safetensors.index.json")) &&
              !exists(tmp_path("model.safetensors")), "shard files");
    size_t n;
    char *text = (char *)fc_slurp(tmp_path("model.safetensors.index.json"), &n);
    CHECK(text && strstr(text, "\"total_size\": 560"), "total_size in %s", text ? text : "");
    free(text);
    tr_st_sharded *s = NULL;
    rc = tr_st_sharded_open(&s, tmpdir, &err);
    CHECK(rc == TR_OK, "read back: %s", err.msg);
    if (s) {
        CHECK(tr_st_sharded_count(s) == 3 && tr_st_sharded_nshards(s) == 3, "counts");
        for (int i = 0; i < 3; i++) {
            tr_st_info t;
            CHECK(tr_st_sharded_lookup(s, e[i].name, &t, &err) == TR_OK, "%s", err.msg);
            CHECK(memcmp(t.data, e[i].data, t.nbytes) == 0, "bytes of %s", e[i].name);
        }
        tr_st_info t;
        tr_st_sharded_lookup(s, "b.small", &t, &err);
        CHECK(strstr(tr_st_path(tr_st_sharded_shard(s, (size_t)t.shard)), "00001-of-00003"),
              "b.small in the first shard");
        tr_st_sharded_lookup(s, "a.big", &t, &err);
        CHECK(strstr(tr_st_path(tr_st_sharded_shard(s, (size_t)t.shard)), "00002-of-00003"),
              "a.big alone in the second");
        tr_st_sharded_close(s);
    }
    tmp_end();

    /* Everything fits: one model.safetensors, opened by the same reader. */
    tmp_begin();
    rc = tr_st_write_sharded(tmpdir, e, 3, NULL, 0, 1 << 20, &err);
    CHECK(rc == TR_OK && exists(tmp_path("model.safetensors")) &&
              !exists(tmp_path("model.safetensors.index.json")), "single: %s", err.msg);
    rc = tr_st_sharded_open(&s, tmpdir, &err);
    CHECK(rc == TR_OK && tr_st_sharded_count(s) == 3 && tr_st_sharded_nshards(s) == 1,
          "single read: %s", err.msg);
    tr_st_sharded_close(s);
    rc = tr_st_sharded_open(&s, tmp_path("model.safetensors"), &err);
    CHECK(rc == TR_OK && tr_st_sharded_count(s) == 3, "a file path: %s", err.msg);
    tr_st_sharded_close(s);
    tr_st_entry dup[] = { e[0], e[0] };
    CHECK(tr_st_write_sharded(tmpdir, dup, 2, NULL, 0, 10, &err) == TR_EUSER &&
              strstr(err.msg, "two tensors"), "duplicates across shards: %s", err.msg);
    tmp_end();

    /* Saving again into the same folder leaves nothing of the previous save behind. */
    tmp_begin();
    fc_spit(tmp_path("model-other.txt"), "keep", 4);
    CHECK(tr_st_write_sharded(tmpdir, e, 3, NULL, 0, 150, &err) == TR_OK, "%s", err.msg);
    CHECK(tr_st_write_sharded(tmpdir, e, 3, NULL, 0, 1 << 20, &err) == TR_OK, "%s", err.msg);
    CHECK(exists(tmp_path("model.safetensors")) &&
              !exists(tmp_path("model.safetensors.index.json")) &&
              !exists(tmp_path("model-00001-of-00003.safetensors")) &&
              exists(tmp_path("model-other.txt")), "single after sharded");
    CHECK(tr_st_write_sharded(tmpdir, e, 3, NULL, 0, 150, &err) == TR_OK, "%s", err.msg);
    CHECK(tr_st_write_sharded(tmpdir, e, 3, NULL, 0, 440, &err) == TR_OK, "%s", err.msg);
    CHECK(!exists(tmp_path("model.safetensors")) &&
              exists(tmp_path("model-00002-of-00002.safetensors")) &&
              !exists(tmp_path("model-00003-of-00003.safetensors")) &&
              !exists(tmp_path("model-00001-of-00003.safetensors")), "2 shards after 3");
    rc = tr_st_sharded_open(&s, tmpdir, &err);
    CHECK(rc == TR_OK && tr_st_sharded_nshards(s) == 2 && tr_st_sharded_count(s) == 3,
          "re-read: %s", err.msg);
    tr_st_sharded_close(s);
    tmp_end();

    /* The golden sharded folder's tensors, split at 24 bytes, give the same three files
     * byte for byte (shards from the reference writer, index as transformers writes it). */
    tmp_begin();
    tr_st_sharded *g = NULL;
    CHECK(tr_st_sharded_open(&g, SHARDED, &err) == TR_OK, "%s", err.msg);
    if (!g) {
        tmp_end();
        return;
    }
    const char *order[] = { "layer.0.w", "layer.0.b", "layer.1.w" };
    tr_st_entry ge[3];
    for (int i = 0; i < 3; i++) {
        tr_st_info t;
        tr_st_sharded_lookup(g, order[i], &t, &err);
        ge[i] = (tr_st_entry){ t.name, t.dtype_name, t.ndim, { 0 }, t.data };
        memcpy(ge[i].shape, t.shape, sizeof ge[i].shape);
    }
    CHECK(tr_st_write_sharded(tmpdir, ge, 3, NULL, 0, 24, &err) == TR_OK, "%s", err.msg);
    const char *files[] = { "model-00001-of-00002.safetensors",
                            "model-00002-of-00002.safetensors", "model.safetensors.index.json" };
    for (int i = 0; i < 3; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s/%s", SHARDED, files[i]);
        size_t a_len = 0, b_len = 0;
        uint8_t *a = fc_slurp(want, &a_len), *b = fc_slurp(tmp_path(files[i]), &b_len);
        CHECK(a && b && a_len == b_len && memcmp(a, b, a_len) == 0, "%s differs", files[i]);
        free(a);
        free(b);
    }
    tr_st_sharded_close(g);
    tmp_end();
}

int main(void)
{
    RUN(test_dtypes);
    RUN(test_golden_read);
    RUN(test_golden_rewrite_identical);
    RUN(test_roundtrip);
    RUN(test_write_errors);
    RUN(test_validation_errors);
    RUN(test_sharded_golden);
    RUN(test_sharded_errors);
    RUN(test_sharded_write);
    return check_done();
}
