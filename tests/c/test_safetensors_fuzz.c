/* test_safetensors_fuzz.c — thousands of damaged safetensors files, from a fixed seed:
 * truncations at every length, bit flips, forged header lengths, and generated headers
 * with wrong dtypes, bad or overlapping offsets, duplicate names, non-UTF-8 bytes,
 * broken JSON, shape/byte mismatches and shapes whose numel x size overflows.
 *
 * Contract checked for every case: tr_st_open either succeeds, and then every tensor's
 * bytes lie inside the file and agree with it, or fails with TR_EUSER, a NULL file and a
 * message that starts with the path. Never a crash or a leak (ASan/UBSan/LSan watch). */
#include "check.h"
#include "file_check.h"
#include "trainer.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define GOLDEN "tests/data/safetensors/golden.safetensors"

/* ------------------------------------------------------------ harness */

static uint64_t rng_state = 0x5eed5afe7e115ull;

static uint64_t rnd(void)   /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static char path[64];
static size_t n_cases, n_loaded;

/* Writes BYTES to the case file, opens it and checks the contract. */
static int run_case(const uint8_t *bytes, size_t len, const char *what)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        CHECK(0, "cannot write %s", path);
        return 0;
    }
    if (len) fwrite(bytes, 1, len, fp);
    fclose(fp);
    n_cases++;

    tr_error err;
    tr_error_clear(&err);
    tr_st_file *f = NULL;
    int rc = tr_st_open(&f, path, &err);
    if (rc != TR_OK) {
        CHECK(rc == TR_EUSER, "%s: status %d: %s", what, rc, err.msg);
        CHECK(f == NULL, "%s: file set on failure", what);
        CHECK(err.msg[0] && strncmp(err.msg, path, strlen(path)) == 0,
              "%s: message should name the file: '%s'", what, err.msg);
        return 0;
    }
    n_loaded++;
    const uint8_t *base = NULL;
    uint64_t hlen = 0;   /* the file loaded, so the length field is sane */
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | bytes[i];
    uint64_t next = 8 + hlen;   /* tensors, in file order, tile the data exactly */
    for (size_t i = 0; i < tr_st_count(f); i++) {
        tr_st_info t;
        CHECK(tr_st_get(f, i, &t) == TR_OK, "%s: get %zu", what, i);
        CHECK(t.offset >= 8 && t.offset <= len && t.nbytes <= len - t.offset,
              "%s: tensor %zu [%llu, +%zu) outside the %zu-byte file", what, i,
              (unsigned long long)t.offset, t.nbytes, len);
        if (t.offset > len || t.nbytes > len - t.offset) break;
        const uint8_t *b = (const uint8_t *)t.data - t.offset;
        if (!base) base = b;
        CHECK(b == base, "%s: tensor %zu's pointer disagrees with its offset", what, i);
        CHECK(t.nbytes == 0 || memcmp(t.data, bytes + t.offset, t.nbytes) == 0,
              "%s: tensor %zu's bytes differ from the file", what, i);
        CHECK(t.ndim >= 0 && t.ndim <= 8, "%s: ndim %d", what, t.ndim);
        int64_t numel = 1;
        for (int d = 0; d < t.ndim; d++) numel *= t.shape[d];
        int32_t bits = tr_st_dtype_bits(t.dtype_name);
        CHECK(bits > 0 && numel == t.numel && (uint64_t)numel * (uint64_t)bits == 8 * t.nbytes,
              "%s: tensor %zu size", what, i);
        CHECK(tr_st_find(f, t.name) == (int64_t)i, "%s: find '%s'", what, t.name);
        CHECK(t.offset == next, "%s: tensor %zu starts at %llu, not %llu", what, i,
              (unsigned long long)t.offset, (unsigned long long)next);
        next = t.offset + t.nbytes;
    }
    CHECK(next == len, "%s: the data ends at %llu in a %zu-byte file", what,
          (unsigned long long)next, len);
    tr_st_close(f);
    return 1;
}

/* A small valid file written by tr_st_write. */
static uint8_t *small_file(size_t *len)
{
    float w[6] = { 1, 2, 3, 4, 5, 6 };
    int64_t ids[2] = { 7, 8 };
    uint8_t m[3] = { 1, 0, 1 };
    tr_st_entry e[] = {
        { "w", "F32", 2, { 2, 3 }, w },
        { "ids", "I64", 1, { 2 }, ids },
        { "mask", "BOOL", 1, { 3 }, m },
    };
    tr_error err;
    if (tr_st_write(path, e, 3, NULL, 0, &err) != TR_OK) return NULL;
    return fc_slurp(path, len);
}

/* ------------------------------------------------------------ mutations of valid files */

static void test_truncations(void)
{
    size_t len;
    uint8_t *b = small_file(&len);
    CHECK(b != NULL, "small file");
    if (!b) return;
    size_t before = n_loaded;
    for (size_t cut = 0; cut <= len; cut++) run_case(b, cut, "truncation");
    CHECK(n_loaded - before == 1, "only the whole file loads (%zu loaded)", n_loaded - before);
    free(b);
    size_t glen;
    uint8_t *g = fc_slurp(GOLDEN, &glen);
    CHECK(g != NULL, "golden");
    if (!g) return;
    before = n_loaded;
    for (size_t cut = 0; cut <= glen; cut++) run_case(g, cut, "golden truncation");
    CHECK(n_loaded - before == 1, "only the whole golden file loads");
    /* Extra bytes after the data are just as wrong. */
    uint8_t *longer = calloc(glen + 16, 1);
    memcpy(longer, g, glen);
    before = n_loaded;
    for (size_t extra = 1; extra <= 16; extra++) run_case(longer, glen + extra, "extension");
    CHECK(n_loaded == before, "trailing bytes refused");
    free(longer);
    free(g);
}

static void test_bit_flips(void)
{
    size_t glen, slen;
    uint8_t *g = fc_slurp(GOLDEN, &glen), *s = small_file(&slen);
    CHECK(g && s, "seeds");
    if (!g || !s) {
        free(g);
        free(s);
        return;
    }
    uint8_t *buf = malloc(glen > slen ? glen : slen);
    for (int c = 0; c < 6000; c++) {
        const uint8_t *src = c & 1 ? g : s;
        size_t len = c & 1 ? glen : slen;
        memcpy(buf, src, len);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | src[i];
        int flips = 1 + (int)rnd_below(4);
        for (int k = 0; k < flips; k++) {
            /* mostly inside the length field and the header, where meaning lives */
            size_t at = rnd_below(4) ? rnd_below((size_t)hlen + 8) : rnd_below(len);
            buf[at] ^= (uint8_t)(1u << rnd_below(8));
        }
        run_case(buf, len, "bit flip");
    }
    free(buf);
    free(g);
    free(s);
}

static void test_header_lengths(void)
{
    size_t len;
    uint8_t *b = small_file(&len);
    if (!b) {
        CHECK(0, "small file");
        return;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | b[i];
    uint64_t fixed[] = { 0, 1, 7, UINT64_MAX, UINT64_MAX - 7, (uint64_t)1 << 63, 100000000,
                         100000001, len, len - 8, len - 7, (uint64_t)1 << 32, hlen + 8 };
    size_t nf = sizeof fixed / sizeof fixed[0];
    size_t before = n_loaded;
    for (size_t c = 0; c < nf + 300; c++) {
        uint64_t v = c < nf ? fixed[c] : c % 3 == 0 ? rnd() : hlen + rnd_below(64) - 32;
        if (v == hlen) continue;
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
        run_case(b, len, "header length");
    }
    CHECK(n_loaded == before, "a wrong header length never loads");
    free(b);
}

/* ------------------------------------------------------------ generated headers */

static const char *const names[] = { "a", "b", "encoder.w", "x.y.z", "a", "dup", "dup",
                                     "n\xc3\xb8", "bad\xff", "q\xe2\x82", "\xed\xa0\x80s" };
static const char *const dtypes[] = { "F32", "F16", "BF16", "I64", "I32", "U8", "BOOL", "F64",
                                      "F4", "F6_E2M3", "F8_E4M3", "C64", "U64", "f32", "F33",
                                      "", "F32 ", "float32" };
static const char *const dims[] = { "0", "1", "2", "3", "4", "-1", "2.0", "\"2\"", "null",
                                    "4294967296", "9223372036854775807",
                                    "18446744073709551616", "1e30", "-9223372036854775808" };

static size_t dtype_bytes_x8(const char *d) { return (size_t)tr_st_dtype_bits(d); }

/* Appends to a bounded text buffer. */
typedef struct text {
    char s[4096];
    size_t n;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
    va_end(ap);
    if (k > 0) t->n += (size_t)k < sizeof t->s - t->n ? (size_t)k : sizeof t->s - t->n - 1;
}

static void test_generated(void)
{
    static uint8_t file[8 + 4096 + 4096];
    size_t loaded_before = n_loaded;
    for (int c = 0; c < 10000; c++) {
        text h = { .n = 0 };
        int mutate = c % 4 != 0;     /* one case in four is left valid */
        int nt = (int)rnd_below(5);
        uint64_t at = 0;
        put(&h, "{");
        if (rnd_below(3) == 0) put(&h, "\"__metadata__\":{\"format\":\"pt\"}%s", nt ? "," : "");
        for (int i = 0; i < nt; i++) {
            const char *name = mutate && rnd_below(3) == 0 ? names[rnd_below(11)] : NULL;
            const char *dt = mutate && rnd_below(4) == 0 ? dtypes[rnd_below(18)]
                                                          : dtypes[rnd_below(8)];
            int ndim = mutate && rnd_below(8) == 0 ? (int)rnd_below(11) : (int)rnd_below(4);
            uint64_t numel = 1;
            int exact = 1;
            if (name) put(&h, "\"%s\":{\"dtype\":\"%s\",\"shape\":[", name, dt);
            else put(&h, "\"t%d\":{\"dtype\":\"%s\",\"shape\":[", i, dt);
            for (int d = 0; d < ndim; d++) {
                if (mutate && rnd_below(6) == 0) {
                    put(&h, "%s%s", d ? "," : "", dims[rnd_below(14)]);
                    exact = 0;
                } else {
                    uint64_t v = rnd_below(4);
                    put(&h, "%s%llu", d ? "," : "", (unsigned long long)v);
                    numel *= v;
                }
            }
            size_t bits = dtype_bytes_x8(dt);
            uint64_t nb = exact && bits ? numel * bits / 8 : rnd_below(16);
            uint64_t b = at, e = at + nb;
            if (mutate && rnd_below(5) == 0) {
                switch (rnd_below(5)) {
                case 0: b += rnd_below(9); e = b + nb; break;        /* gap */
                case 1: b -= b ? rnd_below(b + 1) : 0; break;        /* overlap */
                case 2: { uint64_t x = b; b = e; e = x; } break;     /* reversed */
                case 3: e += rnd_below(9); break;                    /* size mismatch */
                default: b = rnd(); e = b + rnd_below(64); break;    /* far away */
                }
            }
            put(&h, "],\"data_offsets\":[%llu,%llu]}%s", (unsigned long long)b,
                (unsigned long long)e, i + 1 < nt ? "," : "");
            at += nb;
        }
        put(&h, "}");
        if (mutate && rnd_below(4) == 0) {   /* break the JSON text itself */
            static const char junk[] = "{}[],:\"\\ 0-e.\x80\xff";
            size_t pos = rnd_below(h.n);
            switch (rnd_below(3)) {
            case 0: memmove(h.s + pos, h.s + pos + 1, h.n - pos); h.n--; break;
            case 1:
                if (h.n + 1 < sizeof h.s) {
                    memmove(h.s + pos + 1, h.s + pos, h.n - pos + 1);
                    h.s[pos] = junk[rnd_below(sizeof junk - 1)];
                    h.n++;
                }
                break;
            default: h.s[pos] = junk[rnd_below(sizeof junk - 1)]; break;
            }
        }
        if (rnd_below(2)) while (h.n % 8) h.s[h.n++] = ' ';
        uint64_t data = at;
        if (mutate && rnd_below(6) == 0) data = rnd_below(2) ? at + 1 + rnd_below(8)
                                                             : at - (at ? rnd_below(at + 1) : 0);
        if (data > 4096) data = rnd_below(4096);
        for (int i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
        memcpy(file + 8, h.s, h.n);
        for (uint64_t i = 0; i < data; i++) file[8 + h.n + i] = (uint8_t)rnd();
        int ok = run_case(file, 8 + h.n + (size_t)data, mutate ? "generated, damaged" : "generated");
        CHECK(ok || mutate, "case %d: an undamaged generated file failed to load", c);
    }
    /* The generator must exercise both outcomes. */
    CHECK(n_loaded - loaded_before >= 2500, "only %zu generated files loaded",
          n_loaded - loaded_before);
    CHECK(n_loaded - loaded_before <= 8750, "%zu generated files loaded; damage too rare",
          n_loaded - loaded_before);
}

static void test_case_count(void)
{
    printf("# %zu cases, %zu loaded\n", n_cases, n_loaded);
    CHECK(n_cases >= 15000, "only %zu cases", n_cases);
}

int main(void)
{
    /* tmpfs when there is one: rewriting a file thousands of times on ext4 waits on the
     * disk at every close (auto_da_alloc), which would make the run slow, not wrong. */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/tr_st_fuzz_%d.safetensors", dir, (int)getpid());
    RUN(test_truncations);
    RUN(test_bit_flips);
    RUN(test_header_lengths);
    RUN(test_generated);
    RUN(test_case_count);
    unlink(path);
    return check_done();
}
