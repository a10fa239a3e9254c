/* test_rng.c — Philox-4x32-10 against Random123's known-answer vectors, and the keyed
 * streams: determinism, slice independence, the documented layout, dropout keep rate,
 * normal moments. */
#include "check.h"
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ Philox KAT */

static void check_kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4])
{
    uint32_t got[4];
    tr_philox4x32_10(ctr, key, got);
    CHECK(memcmp(got, want, sizeof got) == 0, "ctr %08x.. key %08x..: got %08x %08x %08x %08x",
          ctr[0], key[0], got[0], got[1], got[2], got[3]);
}

/* Random123 tests/kat_vectors, "philox4x32 10" lines. */
static void test_philox_known_answers(void)
{
    const uint32_t c0[4] = { 0, 0, 0, 0 }, k0[2] = { 0, 0 };
    const uint32_t r0[4] = { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 };
    check_kat(c0, k0, r0);

    const uint32_t c1[4] = { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff };
    const uint32_t k1[2] = { 0xffffffff, 0xffffffff };
    const uint32_t r1[4] = { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd };
    check_kat(c1, k1, r1);

    const uint32_t c2[4] = { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 };
    const uint32_t k2[2] = { 0xa4093822, 0x299f31d0 };
    const uint32_t r2[4] = { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 };
    check_kat(c2, k2, r2);
}

/* ------------------------------------------------------------ stream layout */

static const tr_rng_key KEY = { 0x0123456789abcdefull, 7, 3, 2 };

/* The layout documented in rng.h, spelt out independently of rng.c's loops. */
static void test_stream_layout(void)
{
    enum { N = 37 };
    float u[N];
    uint64_t offset = 5;
    tr_rng_uniform(u, N, KEY, offset);
    const uint32_t key[2] = { 0x89abcdefu, 0x01234567u };
    for (int i = 0; i < N; i++) {
        uint64_t e = offset + (uint64_t)i;
        const uint32_t ctr[4] = { KEY.step, KEY.layer, KEY.op, (uint32_t)(e / 4) };
        uint32_t w[4];
        tr_philox4x32_10(ctr, key, w);
        float want = (float)(w[e % 4] >> 8) / 16777216.0f;
        CHECK(u[i] == want, "element %d: %.9g vs %.9g", i, u[i], want);
        CHECK(u[i] >= 0.0f && u[i] < 1.0f, "in [0,1): %.9g", u[i]);
    }
}

/* The keep bits are rng.h's float definition, uniform(e) >= p, element by element (rng.c
 * compares the word's top 24 bits against an integer threshold, and makes the words on AVX2
 * where the CPU has it): p equal to an element's uniform and one float either side of it,
 * p on both sides of a multiple of 2^-24, 0, 1, above 1, NaN, and an
 * offset where the 32-bit block counter wraps inside one batch of 8 blocks. */
static void test_keep_bits_match_float_definition(void)
{
    enum { N = 300 };
    const float ps[] = { 0.0f, 0.1f, 0.5f, 0.9f, 1.0f, 1.5f, -0.25f, NAN,
                         0x1p-24f * 3000000.0f, nextafterf(0x1p-24f * 3000000.0f, 1.0f),
                         nextafterf(0x1p-24f * 3000000.0f, 0.0f), nextafterf(1.0f, 0.0f) };
    const uint64_t offsets[] = { 0, 5, (1ull << 34) - 61 };
    const uint32_t key[2] = { 0x89abcdefu, 0x01234567u };
    int bad = 0;
    for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++) {
        float u[N];
        tr_rng_uniform(u, N, KEY, offsets[oi]);
        /* the fixed p, then p equal to an element's uniform and one float either side of it */
        enum { NFIXED = sizeof ps / sizeof ps[0] };
        for (size_t pi = 0; pi < NFIXED + 3 * 20; pi++) {
            float p = pi < NFIXED ? ps[pi] : u[7 * ((pi - NFIXED) / 3)];
            if (pi >= NFIXED && (pi - NFIXED) % 3 == 1) p = nextafterf(p, 0.0f);
            if (pi >= NFIXED && (pi - NFIXED) % 3 == 2) p = nextafterf(p, 1.0f);
            uint8_t keep[N];
            tr_dropout_mask_bits(keep, N, p, KEY, offsets[oi]);
            for (int i = 0; i < N; i++) {
                uint64_t e = offsets[oi] + (uint64_t)i;
                const uint32_t ctr[4] = { KEY.step, KEY.layer, KEY.op, (uint32_t)(e / 4) };
                uint32_t w[4];
                tr_philox4x32_10(ctr, key, w);
                float want_u = (float)(w[e % 4] >> 8) / 16777216.0f;
                int want = want_u >= p;
                if (u[i] != want_u || keep[i] != want) {
                    if (bad++ < 5)
                        CHECK(0, "offset %llu element %d p %.9g: keep %d (want %d), uniform %.9g (want %.9g)",
                              (unsigned long long)offsets[oi], i, (double)p, keep[i], want, (double)u[i],
                              (double)want_u);
                }
            }
        }
    }
    CHECK(bad == 0, "%d keep bits or uniforms differ from the definition", bad);
}

static void test_same_key_same_bits(void)
{
    enum { N = 1003 };
    float a[N], b[N], c[N];
    tr_rng_uniform(a, N, KEY, 0);
    tr_rng_uniform(b, N, KEY, 0);
    CHECK(memcmp(a, b, sizeof a) == 0, "same key, same stream");
    tr_rng_key other = KEY;
    const char *what[4] = { "seed", "step", "layer", "op" };
    for (int f = 0; f < 4; f++) {
        other = KEY;
        if (f == 0) other.seed ^= (uint64_t)1 << 40;   /* the high key word counts too */
        if (f == 1) other.step++;
        if (f == 2) other.layer++;
        if (f == 3) other.op++;
        tr_rng_uniform(c, N, other, 0);
        int same = 0;
        for (int i = 0; i < N; i++) same += a[i] == c[i];
        CHECK(same < 10, "changing the %s leaves %d of %d values equal", what[f], same, N);
    }
}

/* Any slice, at any offset and length, equals the matching part of the whole stream:
 * what dropout backward and the CUDA kernels rely on. */
static void test_slices_match_whole(void)
{
    enum { N = 4099 };
    static float whole_u[N], whole_n[N], part[N];
    static uint8_t whole_k[N], part_k[N];
    tr_rng_uniform(whole_u, N, KEY, 0);
    tr_rng_normal(whole_n, N, KEY, 0);
    tr_dropout_mask_bits(whole_k, N, 0.3f, KEY, 0);
    const size_t cuts[][2] = { { 0, 1 }, { 1, 1 }, { 3, 2 }, { 2, 5 }, { 7, 100 }, { 1000, 3099 },
                               { 4098, 1 }, { 13, 4086 } };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        size_t off = cuts[c][0], len = cuts[c][1];
        tr_rng_uniform(part, len, KEY, off);
        CHECK(memcmp(part, whole_u + off, len * sizeof(float)) == 0, "uniform slice %zu+%zu", off, len);
        tr_rng_normal(part, len, KEY, off);
        CHECK(memcmp(part, whole_n + off, len * sizeof(float)) == 0, "normal slice %zu+%zu", off, len);
        tr_dropout_mask_bits(part_k, len, 0.3f, KEY, off);
        CHECK(memcmp(part_k, whole_k + off, len) == 0, "mask slice %zu+%zu", off, len);
    }
    /* masks agree with the uniforms they are defined by */
    int bad = 0;
    for (int i = 0; i < N; i++) bad += whole_k[i] != (whole_u[i] >= 0.3f);
    CHECK(bad == 0, "%d mask bits disagree with uniform >= p", bad);
}

/* Big enough for the parallel path; the parallel split must not change a bit. */
static void test_large_stream_matches_slices(void)
{
    size_t n = 200000;
    float *whole = malloc(n * sizeof *whole), *part = malloc(n * sizeof *part);
    CHECK(whole && part, "malloc");
    if (!whole || !part) { free(whole); free(part); return; }
    tr_rng_uniform(whole, n, KEY, 3);
    int bad = 0;
    for (size_t off = 0; off < n; off += 50000) {
        tr_rng_uniform(part, 50000, KEY, 3 + off);
        bad += memcmp(part, whole + off, 50000 * sizeof(float)) != 0;
    }
    CHECK(bad == 0, "%d chunks of the big stream differ", bad);
    free(whole);
    free(part);
}

/* ------------------------------------------------------------ every instruction set */

/* keep bit of element e by rng.h's definition, from the scalar Philox bijection alone. */
static int keep_by_definition(tr_rng_key k, uint64_t e, float p)
{
    const uint32_t key[2] = { (uint32_t)k.seed, (uint32_t)(k.seed >> 32) };
    const uint32_t ctr[4] = { k.step, k.layer, k.op, (uint32_t)(e / 4) };
    uint32_t w[4];
    tr_philox4x32_10(ctr, key, w);
    return (float)(w[e % 4] >> 8) / 16777216.0f >= p;
}

/* One path (portable C, AVX2 with 8 blocks a batch, AVX-512 with 16) against the
 * definition: offsets at every phase of a block and of a 64-element batch, lengths below,
 * at and across a batch, the 32-bit block counter wrapping inside a batch, thresholds at
 * the edges (0, 1, NaN, a multiple of 2^-24 and its neighbours); then a stream big enough
 * for the parallel split against the portable path. main() SKIPs a path the CPU lacks. */
static void keep_isa_case(tr_rng_isa isa, const char *name)
{
    uint8_t probe;
    CHECK(tr_dropout_mask_bits_isa(isa, &probe, 1, 0.5f, KEY, 0) == 0, "%s path refused", name);
    const uint64_t offsets[] = { 0, 1, 2, 3, 5, 61, 63, 64, 4096 + 7, (1ull << 34) - 61, (1ull << 34) - 3 };
    const size_t lens[] = { 1, 3, 4, 63, 64, 65, 129, 300, 1000 };
    const float ps[] = { 0.0f, 0.1f, 0.5f, 0.9f, 1.0f, NAN, -0.5f, 0x1p-24f * 3000000.0f,
                         nextafterf(0x1p-24f * 3000000.0f, 0.0f), nextafterf(1.0f, 0.0f) };
    static uint8_t keep[1000 + 2];
    int bad = 0;
    for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
                size_t n = lens[li];
                keep[n] = keep[n + 1] = 0xA5;   /* sentinels: nothing written past n */
                tr_dropout_mask_bits_isa(isa, keep, n, ps[pi], KEY, offsets[oi]);
                for (size_t i = 0; i < n; i++)
                    if (keep[i] != keep_by_definition(KEY, offsets[oi] + i, ps[pi]) && bad++ < 3)
                        CHECK(0, "%s: offset %llu n %zu p %.9g element %zu: keep %d", name,
                              (unsigned long long)offsets[oi], n, (double)ps[pi], i, keep[i]);
                if (keep[n] != 0xA5 || keep[n + 1] != 0xA5)
                    CHECK(0, "%s: offset %llu n %zu wrote past the end", name, (unsigned long long)offsets[oi], n);
            }
    CHECK(bad == 0, "%s: %d keep bytes differ from the definition", name, bad);

    /* the 32-bit masks are the bytes widened to all ones or zero */
    static uint32_t mask[1000 + 2];
    bad = 0;
    for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t n = lens[li];
            mask[n] = mask[n + 1] = 0xA5A5A5A5u;
            CHECK(tr_dropout_mask_words_isa(isa, mask, n, 0.3f, KEY, offsets[oi]) == 0, "%s words refused", name);
            for (size_t i = 0; i < n; i++)
                bad += mask[i] != (keep_by_definition(KEY, offsets[oi] + i, 0.3f) ? 0xFFFFFFFFu : 0u);
            bad += mask[n] != 0xA5A5A5A5u || mask[n + 1] != 0xA5A5A5A5u;
        }
    CHECK(bad == 0, "%s: %d keep masks differ from the definition (or were written past the end)", name, bad);

    size_t n = 300001;
    uint8_t *got = malloc(n), *want = malloc(n);
    CHECK(got && want, "malloc");
    if (got && want) {
        tr_dropout_mask_bits_isa(isa, got, n, 0.1f, KEY, 13);
        tr_dropout_mask_bits_isa(TR_RNG_ISA_SCALAR, want, n, 0.1f, KEY, 13);
        CHECK(memcmp(got, want, n) == 0, "%s: the parallel stream differs from the portable one", name);
        uint32_t *words = malloc(n * sizeof *words);
        CHECK(words != NULL, "malloc");
        if (words) {
            tr_dropout_mask_words_isa(isa, words, n, 0.1f, KEY, 13);
            size_t wbad = 0;
            for (size_t i = 0; i < n; i++) wbad += words[i] != (want[i] ? 0xFFFFFFFFu : 0u);
            CHECK(wbad == 0, "%s: %zu of the parallel stream's masks differ from its bytes", name, wbad);
        }
        free(words);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) kept += got[i];
        CHECK(kept > n * 85 / 100 && kept < n * 95 / 100, "%s: kept %zu of %zu at p = 0.1", name, kept, n);
    }
    free(got);
    free(want);
}

static void test_keep_bits_portable_path(void) { keep_isa_case(TR_RNG_ISA_SCALAR, "portable"); }
static void test_keep_bits_avx2_path(void) { keep_isa_case(TR_RNG_ISA_AVX2, "AVX2"); }
static void test_keep_bits_avx512_path(void) { keep_isa_case(TR_RNG_ISA_AVX512, "AVX-512"); }

/* A path beyond the CPU's is refused, and the default path is the widest the CPU has. */
static void test_keep_bits_isa_choice(void)
{
    tr_rng_isa best = tr_rng_cpu_isa();
    uint8_t k[8] = { 7, 7, 7, 7, 7, 7, 7, 7 };
    if (best < TR_RNG_ISA_AVX512)
        CHECK(tr_dropout_mask_bits_isa(TR_RNG_ISA_AVX512, k, 8, 0.5f, KEY, 0) == -1 && k[0] == 7,
              "an absent path must be refused and write nothing");
    CHECK(tr_dropout_mask_bits_isa((tr_rng_isa)7, k, 8, 0.5f, KEY, 0) == -1 && k[0] == 7, "unknown path refused");
    uint8_t a[100], b[100];
    tr_dropout_mask_bits(a, 100, 0.3f, KEY, 9);
    CHECK(tr_dropout_mask_bits_isa(best, b, 100, 0.3f, KEY, 9) == 0, "the CPU's own path runs");
    CHECK(memcmp(a, b, 100) == 0, "tr_dropout_mask_bits is the CPU's widest path");
    uint32_t m[100];
    tr_dropout_mask_words(m, 100, 0.3f, KEY, 9);
    int bad = 0;
    for (int i = 0; i < 100; i++) bad += m[i] != (a[i] ? 0xFFFFFFFFu : 0u);
    CHECK(bad == 0, "tr_dropout_mask_words is the bytes widened: %d differ", bad);
}

/* ------------------------------------------------------------ distributions */

static void test_dropout_keep_rate(void)
{
    size_t n = 1000000;
    uint8_t *keep = malloc(n);
    CHECK(keep != NULL, "malloc");
    if (!keep) return;
    const float ps[4] = { 0.1f, 0.5f, 0.9f, 0.0f };
    for (int j = 0; j < 4; j++) {
        float p = ps[j];
        tr_rng_key k = KEY;
        k.op = 100 + (uint32_t)j;
        tr_dropout_mask_bits(keep, n, p, k, 0);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) kept += keep[i];
        double q = 1.0 - p, sigma = sqrt(n * q * (1 - q));
        CHECK(fabs((double)kept - n * q) <= 5 * sigma, "p=%g kept %zu of %zu (expected %.0f +- %.0f)",
              p, kept, n, n * q, sigma);
        if (p == 0.0f) CHECK(kept == n, "p=0 keeps everything");
    }
    tr_dropout_mask_bits(keep, 1000, 1.0f, KEY, 0);
    size_t kept = 0;
    for (int i = 0; i < 1000; i++) kept += keep[i];
    CHECK(kept == 0, "p=1 drops everything: kept %zu", kept);
    free(keep);
}

/* n floats (the caller frees); NULL after a failed CHECK when out of memory. */
static float *floats(size_t n)
{
    float *f = malloc(n * sizeof *f);
    CHECK(f != NULL, "malloc");
    return f;
}

static void test_normal_moments(void)
{
    size_t n = 1000000;
    float *z = floats(n);
    if (!z) return;
    tr_rng_normal(z, n, KEY, 11);
    double s = 0, s2 = 0, s4 = 0;
    size_t beyond3 = 0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        double v = z[i];
        if (!isfinite(v)) finite = 0;
        s += v;
        s2 += v * v;
        s4 += v * v * v * v;
        beyond3 += fabs(v) > 3.0;
    }
    double mean = s / n, var = s2 / n - mean * mean, kurt = s4 / n;
    CHECK(finite, "every normal is finite");
    /* standard errors: mean 1e-3, variance ~1.4e-3, 4th moment ~9.8e-3 */
    CHECK(fabs(mean) < 5e-3, "mean %g", mean);
    CHECK(fabs(var - 1.0) < 8e-3, "variance %g", var);
    CHECK(fabs(kurt - 3.0) < 0.05, "fourth moment %g", kurt);
    /* P(|z| > 3) = 0.0027 */
    CHECK(fabs(beyond3 / (double)n - 0.0027) < 0.0003, "tail fraction %g", beyond3 / (double)n);
    free(z);
}

static void test_uniform_moments(void)
{
    size_t n = 1000000;
    float *u = floats(n);
    if (!u) return;
    tr_rng_uniform(u, n, KEY, 0);
    double s = 0, s2 = 0;
    size_t buckets[10] = { 0 };
    for (size_t i = 0; i < n; i++) {
        s += u[i];
        s2 += (double)u[i] * u[i];
        buckets[(int)(u[i] * 10)]++;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    CHECK(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / n), "mean %g", mean);
    CHECK(fabs(var - 1.0 / 12) < 1e-3, "variance %g", var);
    for (int b = 0; b < 10; b++)
        CHECK(fabs(buckets[b] - n / 10.0) < 5 * sqrt(n * 0.09), "bucket %d has %zu", b, buckets[b]);
    free(u);
}

int main(void)
{
    RUN(test_philox_known_answers);
    RUN(test_stream_layout);
    RUN(test_keep_bits_match_float_definition);
    RUN(test_same_key_same_bits);
    RUN(test_slices_match_whole);
    RUN(test_large_stream_matches_slices);
    RUN(test_keep_bits_portable_path);
    if (tr_rng_cpu_isa() >= TR_RNG_ISA_AVX2) RUN(test_keep_bits_avx2_path);
    else printf("SKIP test_keep_bits_avx2_path: this CPU (or build) has no AVX2\n");
    if (tr_rng_cpu_isa() >= TR_RNG_ISA_AVX512) RUN(test_keep_bits_avx512_path);
    else printf("SKIP test_keep_bits_avx512_path: this CPU (or build) has no AVX-512\n");
    RUN(test_keep_bits_isa_choice);
    RUN(test_dropout_keep_rate);
    RUN(test_normal_moments);
    RUN(test_uniform_moments);
    return check_done();
}
