/* test_tfrecord.c — CRC-32C against its published check values (RFC 3720 B.4 and the
 * "123456789" check), the continuation and masking contracts, and TFRecord frames
 * against bytes made by TensorBoard's own code: masked_crc32c of the PyPI tensorboard
 * package (its compat.tensorflow_stub module), framed as its PyRecordReader reads them. */
#include "check.h"
#include "trainer.h"

#include <stdint.h>
#include <string.h>

static void test_crc32c_check_values(void)
{
    uint8_t buf[32];
    CHECK(tr_crc32c(0, "123456789", 9) == 0xE3069283u, "got %08x", tr_crc32c(0, "123456789", 9));
    memset(buf, 0, sizeof buf);
    CHECK(tr_crc32c(0, buf, 32) == 0x8A9136AAu, "32 zeros: got %08x", tr_crc32c(0, buf, 32));
    memset(buf, 0xFF, sizeof buf);
    CHECK(tr_crc32c(0, buf, 32) == 0x62A8AB43u, "32 x ff: got %08x", tr_crc32c(0, buf, 32));
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    CHECK(tr_crc32c(0, buf, 32) == 0x46DD794Eu, "0..31: got %08x", tr_crc32c(0, buf, 32));
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    CHECK(tr_crc32c(0, buf, 32) == 0x113FDB5Cu, "31..0: got %08x", tr_crc32c(0, buf, 32));
    CHECK(tr_crc32c(0, NULL, 0) == 0, "empty: got %08x", tr_crc32c(0, NULL, 0));
}

/* crc(a + b) == tr_crc32c(tr_crc32c(0, a), b), at every split point */
static void test_crc32c_continues(void)
{
    const char *s = "123456789";
    for (size_t k = 0; k <= 9; k++) {
        uint32_t c = tr_crc32c(tr_crc32c(0, s, k), s + k, 9 - k);
        CHECK(c == 0xE3069283u, "split at %zu: got %08x", k, c);
    }
}

static void test_crc32c_mask(void)
{
    /* ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32 */
    CHECK(tr_crc32c_mask(0) == 0xA282EAD8u, "got %08x", tr_crc32c_mask(0));
    CHECK(tr_crc32c_mask(0xE3069283u) == (((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xA282EAD8u), "got %08x",
          tr_crc32c_mask(0xE3069283u));
    CHECK(tr_crc32c_mask(0xFFFFFFFFu) == 0xA282EAD7u, "wraps: got %08x", tr_crc32c_mask(0xFFFFFFFFu));
}

static void check_hex(const uint8_t *got, size_t n, const char *hex)
{
    CHECK(strlen(hex) == 2 * n, "%zu bytes, the expected frame has %zu", n, strlen(hex) / 2);
    for (size_t i = 0; i < n && 2 * i + 1 < strlen(hex); i++) {
        unsigned want;
        sscanf(hex + 2 * i, "%2x", &want);
        CHECK(got[i] == want, "byte %zu: %02x, expected %02x", i, got[i], want);
        if (got[i] != want) break;
    }
}

/* Frames as TensorBoard's reader expects them: length 8 LE, masked CRC of the length,
 * the data, masked CRC of the data. The expected bytes came from the tensorboard
 * package's masked_crc32c and struct.pack("<Q"/"<I"). */
static void test_frame_matches_tensorboard(void)
{
    uint8_t out[64];
    memset(out, 0xAB, sizeof out);
    size_t n = tr_tfrecord_frame(out, NULL, 0);
    CHECK(n == TR_TFRECORD_OVERHEAD, "empty record: %zu bytes", n);
    check_hex(out, n, "000000000000000029039807d8ea82a2");
    CHECK(out[n] == 0xAB, "wrote past the record");

    const char *msg = "hello, tensorboard";
    memset(out, 0xAB, sizeof out);
    n = tr_tfrecord_frame(out, msg, strlen(msg));
    CHECK(n == strlen(msg) + 16, "%zu bytes", n);
    check_hex(out, n, "1200000000000000241f642568656c6c6f2c2074656e736f72626f617264ba263289");
    CHECK(out[n] == 0xAB, "wrote past the record");
}

/* The layout field by field on a longer record (a length above one byte), so that each
 * CRC covers exactly its own bytes. */
static void test_frame_layout(void)
{
    enum { N = 300 };
    static uint8_t data[N], out[N + TR_TFRECORD_OVERHEAD];
    for (int i = 0; i < N; i++) data[i] = (uint8_t)(i * 7 + 1);
    size_t n = tr_tfrecord_frame(out, data, N);
    CHECK(n == N + 16u, "%zu bytes", n);
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--) len = (len << 8) | out[i];
    CHECK(len == N, "length field %llu", (unsigned long long)len);
    uint32_t lcrc = (uint32_t)out[8] | (uint32_t)out[9] << 8 | (uint32_t)out[10] << 16 | (uint32_t)out[11] << 24;
    CHECK(lcrc == tr_crc32c_mask(tr_crc32c(0, out, 8)), "length CRC %08x", lcrc);
    CHECK(memcmp(out + 12, data, N) == 0, "data not copied whole");
    const uint8_t *t = out + 12 + N;
    uint32_t dcrc = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
    CHECK(dcrc == tr_crc32c_mask(tr_crc32c(0, data, N)), "data CRC %08x", dcrc);
}

int main(void)
{
    RUN(test_crc32c_check_values);
    RUN(test_crc32c_continues);
    RUN(test_crc32c_mask);
    RUN(test_frame_matches_tensorboard);
    RUN(test_frame_layout);
    return check_done();
}
