/* crc32c.c — CRC-32C (Castagnoli) by a 256-entry table (crc32c.h has the contract).
 *
 * The table is built on first use under pthread_once, so two threads that checksum at
 * once never see it half-filled. */
#include "crc32c.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static const uint32_t CRC32C_POLY = 0x82F63B78u; /* 0x1EDC6F41 bit-reversed */
static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

/* crc32c_table[b]: the remainder of byte b shifted through the polynomial, bit by bit. */
static void crc32c_build(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc32c_table[b] = c;
    }
}

uint32_t tr_crc32c(uint32_t crc, const void *data, size_t n)
{
    /* pthread_once fails only for an invalid control block, which this one never is;
     * a checksum computed from an empty table would be silently wrong, so stop instead */
    int rc = pthread_once(&crc32c_once, crc32c_build);
    if (rc != 0) {
        fprintf(stderr, "trainer: crc32c: pthread_once failed (error %d)\n", rc);
        abort();
    }
    const uint8_t *p = data;
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) c = crc32c_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    return ~c;
}

uint32_t tr_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}
