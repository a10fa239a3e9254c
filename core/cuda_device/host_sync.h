/* host_sync.h — the CUDA backend's host round trips, counted: every device-to-host copy and
 * every wait of the host for a device (stream, event, device synchronisation) that core/
 * makes goes through tr_host_sync_note, so a test (or a user on a real GPU) can see how
 * many a training step makes between two logged steps, without the emulator's help.
 *
 * The counters are process-wide, atomic, and never reset: read them before and after the
 * work of interest and subtract. A build without CUDA has them too (always 0), so a script
 * reads them on any device.
 *
 * Not a round trip, and counted apart (feed_waits): the batch feed's wait for the upload
 * that last read a pinned slot, before the host rewrites it (core/cuda_device/batch_feed.c). It
 * waits on the feed's copy stream for a copy queued two batches earlier, never on the
 * compute stream; it is what bounds how far the host runs ahead of the device. */
#ifndef TR_HOST_SYNC_H
#define TR_HOST_SYNC_H

#include <stdint.h>

typedef struct tr_host_syncs {
    uint64_t copies_d2h;    /* device -> host copies (cudaMemcpy*Async to host memory) */
    uint64_t stream_syncs;  /* cudaStreamSynchronize */
    uint64_t event_syncs;   /* cudaEventSynchronize and polled event waits, the feed's apart */
    uint64_t device_syncs;  /* cudaDeviceSynchronize */
    uint64_t feed_waits;    /* the batch feed's slot waits (above); not in round_trips */
    uint64_t round_trips;   /* copies_d2h + stream_syncs + event_syncs + device_syncs */
} tr_host_syncs;

/* What tr_host_sync_note counts. */
typedef enum tr_host_sync_kind {
    TR_HOST_SYNC_COPY_D2H = 0,
    TR_HOST_SYNC_STREAM = 1,
    TR_HOST_SYNC_EVENT = 2,
    TR_HOST_SYNC_DEVICE = 3,
    TR_HOST_SYNC_FEED_WAIT = 4
} tr_host_sync_kind;

/* *out = the counts since the process started. */
void tr_host_syncs_get(tr_host_syncs *out);
/* Counts one round trip of `kind`; called by core/ right before the CUDA call it counts. */
void tr_host_sync_note(int kind);

#endif
