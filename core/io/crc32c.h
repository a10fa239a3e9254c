/* crc32c.h — CRC-32C (Castagnoli), the checksum of TFRecord files (tfrecord.h).
 *
 * The polynomial 0x1EDC6F41 in its reflected form 0x82F63B78, initial value and final xor
 * 0xFFFFFFFF, as in RFC 3720 (iSCSI) and TensorFlow's crc32c: "123456789" gives
 * 0xE3069283. zlib has only the other CRC-32 (0x04C11DB7), so this is a byte-wise table
 * of 256 entries, built once. */
#ifndef TR_CRC32C_H
#define TR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of n bytes at data, continuing crc (0 to start; a previous result to
 * extend it: crc(a + b) = tr_crc32c(tr_crc32c(0, a), b)). data may be NULL when n is 0. */
uint32_t tr_crc32c(uint32_t crc, const void *data, size_t n);

/* TFRecord's masked form of a CRC-32C: ((crc >> 15) | (crc << 17)) + 0xA282EAD8, so that
 * a record holding CRCs does not checksum to a predictable value. */
uint32_t tr_crc32c_mask(uint32_t crc);

#endif
