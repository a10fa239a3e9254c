/* batch_feed.h — the training batches' way to the device: the host
 * collates a micro-batch (token ids, attention mask, token type ids as i32; targets as i64)
 * into a pinned host slot, and the slot is uploaded on a copy stream of its own, so that
 * preparing batch n + 1 overlaps the GPU's work on batch n and no step waits for the device.
 *
 * Two slots, used in turn. Each has a pinned host buffer and a device buffer (one i32 and
 * one i64 tensor of the slot's capacity, from the device's allocator, tag activations) and
 * two events:
 *   uploaded[b]  recorded on the copy stream after slot b's copies; the compute stream
 *                waits for it before the step's kernels (a device-side wait, no host sync);
 *   released[b]  recorded on the compute stream once the work that reads slot b's device
 *                buffer is queued (tr_batch_feed_release), and when the buffer is new (a
 *                block the allocator hands out may still be read by queued compute work);
 *                the next upload into slot b makes the copy stream wait for it.
 * The host rewrites slot b's pinned buffer only after uploaded[b] has completed
 * (tr_batch_feed_begin waits for it: the one host wait, for a copy queued two batches
 * before, normally long done). A slot that was uploaded and never released (an error in
 * the step) is released at its next begin, conservatively: after everything queued.
 *
 * Device TR_CPU is the stand-in that runs in the normal test suite: the same slots, the
 * "device" buffers are CPU tensors and the upload is a copy on return; no events.
 *
 * The caller takes views of the device buffers (tr_tensor_narrow / reshape): a view keeps
 * its storage alive, so a slot that grows (a longer batch) frees its old buffer safely.
 * Errors name the function and the device, then the CUDA message; nothing is left queued
 * that reads a host buffer the feed frees. */
#ifndef TR_BATCH_FEED_H
#define TR_BATCH_FEED_H

#include "tensor.h"

typedef struct tr_batch_feed tr_batch_feed;

/* A feed for `device` (TR_CPU or a CUDA ordinal); NULL with ctx's error set. Makes the
 * copy stream and events (CUDA); buffers are made by the first begin. */
tr_batch_feed *tr_batch_feed_new(tr_ctx *ctx, int device);
/* Waits for queued uploads, then frees the buffers, events and the copy stream. NULL is
 * a no-op. Views handed out stay valid (they hold their storage). */
void tr_batch_feed_free(tr_batch_feed *f);

/* Takes the next slot for a batch of n32 i32 and n64 i64 values: waits until the slot's
 * last upload has read its host buffer, grows the buffers when needed, and returns the
 * host pointers to fill (n32 and n64 values; a pointer for a count of 0 may be NULL). */
int tr_batch_feed_begin(tr_batch_feed *f, int64_t n32, int64_t n64, int32_t **host32, int64_t **host64);
/* Queues the upload of the slot taken by the last begin (copy stream: wait released,
 * copies, record uploaded; compute stream: wait uploaded) and gives its device buffers
 * (flat i32 and i64 tensors of at least n32 and n64 elements; the feed owns them: take
 * views, never free them). */
int tr_batch_feed_upload(tr_batch_feed *f, tr_tensor **dev32, tr_tensor **dev64);
/* The work that reads the last uploaded slot is queued: records released on the compute
 * stream. */
int tr_batch_feed_release(tr_batch_feed *f);

/* The slot the last begin took (0 or 1), and whether the host buffers are pinned (1;
 * 0 on the CPU or where the system refused to pin), for tests and reports. */
int tr_batch_feed_slot(const tr_batch_feed *f);
int tr_batch_feed_pinned(const tr_batch_feed *f);

#endif
