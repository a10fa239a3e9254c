/* tfrecord.h — TFRecord framing, the container of TensorBoard's event files.
 *
 * One record is, in this order (integers little-endian):
 *   uint64  length of the data, n
 *   uint32  masked CRC-32C of those 8 length bytes
 *   n bytes the data (an Event protocol buffer in an event file)
 *   uint32  masked CRC-32C of the data
 * so a record takes n + TR_TFRECORD_OVERHEAD bytes. A reader checks both CRCs
 * (TensorBoard raises DataLossError on a mismatch), which is how a torn or damaged file
 * is told apart from a whole one. */
#ifndef TR_TFRECORD_H
#define TR_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

enum { TR_TFRECORD_OVERHEAD = 16 }; /* length, its CRC, the data's CRC */

/* Writes the record of n bytes at data into out, which holds at least
 * n + TR_TFRECORD_OVERHEAD bytes and does not overlap data. Returns the bytes written,
 * n + TR_TFRECORD_OVERHEAD. data may be NULL when n is 0. */
size_t tr_tfrecord_frame(uint8_t *out, const void *data, size_t n);

#endif
