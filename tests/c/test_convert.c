/* test_convert.c — f32 <-> bf16 / f16 scalar conversions and tr_convert between every
 * dtype pair. f16 is checked against GCC's _Float16 (hardware or libgcc soft-float),
 * used here in the test only; the library does not rely on it. */
#include "check.h"
#include "trainer.h"

#include <math.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* xorshift64*: deterministic test inputs */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* ------------------------------------------------------------ bf16 */

static void test_bf16_roundtrip_exhaustive(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tr_bf16_to_f32((uint16_t)h);
        CHECK(bits(f) == h << 16, "bf16 %04x widened to %08x", h, bits(f));
        uint16_t back = tr_f32_to_bf16(f);
        int is_nan = (h & 0x7fff) > 0x7f80;
        if (is_nan) {
            /* NaN stays NaN, quiet, same sign */
            if (!((back & 0x7fff) > 0x7f80 && (back & 0x0040) && (back & 0x8000) == (h & 0x8000))) bad++;
        } else if (back != h) {
            bad++;
        }
    }
    CHECK(bad == 0, "%d bf16 patterns did not round-trip", bad);
}

static void test_bf16_rounding(void)
{
    /* 1 + 2^-8 is the tie between 1 and 1+2^-7: even is 1 (0x3f80) */
    CHECK(tr_f32_to_bf16(from_bits(0x3f808000)) == 0x3f80, "tie to even down");
    /* 1+2^-7 + 2^-8 ties between 0x3f81 (odd) and 0x3f82: even is 0x3f82 */
    CHECK(tr_f32_to_bf16(from_bits(0x3f818000)) == 0x3f82, "tie to even up");
    CHECK(tr_f32_to_bf16(from_bits(0x3f808001)) == 0x3f81, "above tie rounds up");
    CHECK(tr_f32_to_bf16(from_bits(0x3f807fff)) == 0x3f80, "below tie rounds down");
    CHECK(tr_f32_to_bf16(from_bits(0xbf818000)) == 0xbf82, "negative tie to even");
    /* largest finite f32 lies above the last bf16 midpoint: rounds to inf */
    CHECK(tr_f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80, "overflow to inf: %04x",
          tr_f32_to_bf16(from_bits(0x7f7fffff)));
    CHECK(tr_f32_to_bf16(from_bits(0x7f7f7fff)) == 0x7f7f, "largest finite stays finite");
    CHECK(tr_f32_to_bf16(from_bits(0x7f7f8000)) == 0x7f80, "tie at the top goes to even (inf)");
    CHECK(tr_f32_to_bf16(-INFINITY) == 0xff80, "-inf");
    /* signalling NaN with payload only in low bits must not become inf */
    uint16_t n = tr_f32_to_bf16(from_bits(0x7f800001));
    CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0, "sNaN stays NaN: %04x", n);
    n = tr_f32_to_bf16(from_bits(0xffffffff));
    CHECK(n == 0xffff, "NaN all ones: %04x", n);
    /* subnormals round like everything else */
    CHECK(tr_f32_to_bf16(from_bits(0x00008000)) == 0x0000, "subnormal tie to even zero");
    CHECK(tr_f32_to_bf16(from_bits(0x00018000)) == 0x0002, "subnormal tie to even two");
}

/* ------------------------------------------------------------ f16 */

static void test_f16_roundtrip_exhaustive(void)
{
    int bad = 0, bad_hw = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tr_f16_to_f32((uint16_t)h);
        _Float16 hw;
        uint16_t hh = (uint16_t)h;
        memcpy(&hw, &hh, 2);
        float ref = (float)hw;
        int is_nan = (h & 0x7fff) > 0x7c00;
        if (is_nan) {
            if (!isnan(f)) bad_hw++;
            uint16_t back = tr_f32_to_f16(f);
            if (!((back & 0x7fff) > 0x7c00 && (back & 0x0200) && (back & 0x8000) == (h & 0x8000))) bad++;
            /* payload bits survive the round trip */
            if ((back & 0x1ff) != (h & 0x1ff)) bad++;
        } else {
            if (bits(f) != bits(ref)) bad_hw++;
            if (tr_f32_to_f16(f) != h) bad++;
        }
    }
    CHECK(bad_hw == 0, "%d f16 patterns widen differently from _Float16", bad_hw);
    CHECK(bad == 0, "%d f16 patterns did not round-trip", bad);
}

static void test_f16_boundaries(void)
{
    /* smallest subnormal 2^-24, largest subnormal, smallest normal 2^-14 */
    CHECK(tr_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001, "2^-24");
    CHECK(tr_f16_to_f32(0x0001) == ldexpf(1.0f, -24), "0x0001 widens to 2^-24");
    CHECK(tr_f32_to_f16(ldexpf(1023.0f, -24)) == 0x03ff, "largest subnormal");
    CHECK(tr_f32_to_f16(ldexpf(1.0f, -14)) == 0x0400, "smallest normal");
    /* just below 2^-14 by less than half an f16 subnormal ulp rounds up to the normal */
    CHECK(tr_f32_to_f16(ldexpf(2047.0f, -25)) == 0x0400, "1023.5 ulp ties to even 1024");
    CHECK(tr_f32_to_f16(ldexpf(2045.0f, -25)) == 0x03fe, "1022.5 ulp ties to even 1022");
    /* 2^-25 is the tie between 0 and the smallest subnormal: even is 0 */
    CHECK(tr_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000, "2^-25 ties to zero");
    CHECK(tr_f32_to_f16(ldexpf(3.0f, -26)) == 0x0001, "0.75 ulp rounds up");
    CHECK(tr_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002, "1.5 ulp ties to even 2");
    CHECK(tr_f32_to_f16(-ldexpf(1.0f, -30)) == 0x8000, "tiny negative is -0");
    CHECK(tr_f32_to_f16(from_bits(0x00000001)) == 0x0000, "f32 denormal to 0");
    /* ties in the normal range: 1 + 2^-11 between 1 and 1+2^-10 */
    CHECK(tr_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00, "normal tie down to even");
    CHECK(tr_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02, "normal tie up to even");
    /* overflow: 65504 is the largest; 65519.99 stays; 65520 is the tie and goes to inf */
    CHECK(tr_f32_to_f16(65504.0f) == 0x7bff, "65504");
    CHECK(tr_f32_to_f16(65519.99f) == 0x7bff, "just below the top midpoint");
    CHECK(tr_f32_to_f16(65520.0f) == 0x7c00, "65520 -> inf");
    CHECK(tr_f32_to_f16(-1e10f) == 0xfc00, "-1e10 -> -inf");
    CHECK(tr_f32_to_f16(INFINITY) == 0x7c00, "inf");
    CHECK(tr_f32_to_f16(from_bits(0x7f7fffff)) == 0x7c00, "FLT_MAX -> inf");
    uint16_t n = tr_f32_to_f16(from_bits(0x7f800001));
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0, "sNaN stays NaN: %04x", n);
    CHECK(isinf(tr_f16_to_f32(0x7c00)) && tr_f16_to_f32(0xfc00) < 0, "f16 inf widens");
}

/* Random floats over every exponent, plus values concentrated in f16's range,
 * against GCC's _Float16 conversion. */
static void test_f16_against_float16(void)
{
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = next_u32();
        if (i & 1) {
            /* exponent in f16's neighbourhood: 2^-27 .. 2^17 */
            uint32_t e = 100 + (u >> 27) % 45;
            u = (u & 0x807fffffu) | (e << 23);
        }
        float f = from_bits(u);
        _Float16 hw = (_Float16)f;
        uint16_t ref;
        memcpy(&ref, &hw, 2);
        uint16_t got = tr_f32_to_f16(f);
        if (isnan(f)) {
            if (!((got & 0x7fff) > 0x7c00)) bad++;
        } else if (got != ref) {
            if (bad < 5) printf("  f32 %08x: got %04x want %04x\n", u, got, ref);
            bad++;
        }
    }
    CHECK(bad == 0, "%d of 2e6 random floats convert differently from _Float16", bad);
}

/* ------------------------------------------------------------ tr_convert */

static void test_convert_bulk_matches_scalar(void)
{
    enum { N = 1000 };   /* not a multiple of the block: covers the tail */
    float src[N];
    uint16_t b[N], h[N];
    float back_b[N], back_h[N];
    for (int i = 0; i < N; i++) src[i] = from_bits(next_u32());
    src[0] = NAN;
    src[1] = 65520.0f;
    src[2] = ldexpf(1.0f, -25);
    tr_convert(b, TR_BF16, src, TR_F32, N);
    tr_convert(h, TR_F16, src, TR_F32, N);
    tr_convert(back_b, TR_F32, b, TR_BF16, N);
    tr_convert(back_h, TR_F32, h, TR_F16, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (b[i] != tr_f32_to_bf16(src[i])) bad++;
        if (h[i] != tr_f32_to_f16(src[i])) bad++;
        if (bits(back_b[i]) != bits(tr_bf16_to_f32(b[i]))) bad++;
        if (bits(back_h[i]) != bits(tr_f16_to_f32(h[i]))) bad++;
    }
    CHECK(bad == 0, "%d bulk conversions differ from the scalar ones", bad);
}

static void test_convert_all_pairs(void)
{
    /* values exact in every dtype */
    const double vals[6] = { 0, 1, -2, 3, 100, -2048 };
    for (int s = 0; s < TR_NDTYPES; s++) {
        for (int d = 0; d < TR_NDTYPES; d++) {
            unsigned char src[6 * 8], mid[6 * 8];
            /* build the source through f64 -> f32 -> src */
            float f[6];
            for (int i = 0; i < 6; i++) f[i] = (float)vals[i];
            tr_convert(src, s, f, TR_F32, 6);
            tr_convert(mid, d, src, s, 6);
            float out[6];
            tr_convert(out, TR_F32, mid, d, 6);
            for (int i = 0; i < 6; i++)
                CHECK(out[i] == f[i], "%s -> %s element %d: %g vs %g", tr_dtype_name(s),
                      tr_dtype_name(d), i, out[i], f[i]);
        }
    }
}

static void test_convert_ints(void)
{
    float f[6] = { 2.9f, -2.9f, NAN, 3e9f, -3e9f, 1e30f };
    int32_t i32[6];
    tr_convert(i32, TR_I32, f, TR_F32, 6);
    CHECK(i32[0] == 2 && i32[1] == -2, "truncates toward zero: %d %d", i32[0], i32[1]);
    CHECK(i32[2] == 0, "NaN -> 0: %d", i32[2]);
    CHECK(i32[3] == INT32_MAX && i32[4] == INT32_MIN, "saturates: %d %d", i32[3], i32[4]);
    int64_t i64[6];
    tr_convert(i64, TR_I64, f, TR_F32, 6);
    CHECK(i64[3] == 3000000000ll && i64[5] == INT64_MAX, "i64: %lld %lld", (long long)i64[3],
          (long long)i64[5]);
    int64_t big[3] = { (int64_t)1 << 40, -((int64_t)1 << 40), 7 };
    int32_t narrow[3];
    tr_convert(narrow, TR_I32, big, TR_I64, 3);
    CHECK(narrow[0] == INT32_MAX && narrow[1] == INT32_MIN && narrow[2] == 7, "i64 -> i32 saturates");
    int64_t wide[3];
    tr_convert(wide, TR_I64, narrow, TR_I32, 3);
    CHECK(wide[0] == INT32_MAX && wide[2] == 7, "i32 -> i64 by value");
    int64_t exact = ((int64_t)1 << 53) + 1;
    int64_t copy;
    tr_convert(&copy, TR_I64, &exact, TR_I64, 1);
    CHECK(copy == exact, "same dtype copies bits");
    /* bf16 <-> f16 through f32: 1/3 in f16 to bf16 rounds once */
    uint16_t third_h = tr_f32_to_f16(1.0f / 3.0f), third_b;
    tr_convert(&third_b, TR_BF16, &third_h, TR_F16, 1);
    CHECK(third_b == tr_f32_to_bf16(tr_f16_to_f32(third_h)), "f16 -> bf16");
}

int main(void)
{
    RUN(test_bf16_roundtrip_exhaustive);
    RUN(test_bf16_rounding);
    RUN(test_f16_roundtrip_exhaustive);
    RUN(test_f16_boundaries);
    RUN(test_f16_against_float16);
    RUN(test_convert_bulk_matches_scalar);
    RUN(test_convert_all_pairs);
    RUN(test_convert_ints);
    return check_done();
}
