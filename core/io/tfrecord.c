/* tfrecord.c — one TFRecord around a block of bytes (tfrecord.h has the layout). The
 * bytes are placed one by one, so the file is little-endian on any host. */
#include "tfrecord.h"

#include "crc32c.h"

#include <string.h>

static void put_u32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

size_t tr_tfrecord_frame(uint8_t *out, const void *data, size_t n)
{
    uint64_t len = (uint64_t)n;
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(len >> (8 * i));
    put_u32le(out + 8, tr_crc32c_mask(tr_crc32c(0, out, 8)));
    if (n > 0) memcpy(out + 12, data, n);
    put_u32le(out + 12 + n, tr_crc32c_mask(tr_crc32c(0, data, n)));
    return n + TR_TFRECORD_OVERHEAD;
}
