/* host_sync.c — the process-wide counters of host_sync.h. Compiled in every build (without
 * CUDA nothing calls tr_host_sync_note and the counts stay 0); relaxed atomics, since the
 * counts order nothing and host threads may use the device at once. */
#include "host_sync.h"

enum { KINDS = 5 };

static uint64_t counts[KINDS];

void tr_host_sync_note(int kind)
{
    if (kind < 0 || kind >= KINDS) return;
    __atomic_fetch_add(&counts[kind], 1, __ATOMIC_RELAXED);
}

void tr_host_syncs_get(tr_host_syncs *out)
{
    if (!out) return;
    out->copies_d2h = __atomic_load_n(&counts[TR_HOST_SYNC_COPY_D2H], __ATOMIC_RELAXED);
    out->stream_syncs = __atomic_load_n(&counts[TR_HOST_SYNC_STREAM], __ATOMIC_RELAXED);
    out->event_syncs = __atomic_load_n(&counts[TR_HOST_SYNC_EVENT], __ATOMIC_RELAXED);
    out->device_syncs = __atomic_load_n(&counts[TR_HOST_SYNC_DEVICE], __ATOMIC_RELAXED);
    out->feed_waits = __atomic_load_n(&counts[TR_HOST_SYNC_FEED_WAIT], __ATOMIC_RELAXED);
    out->round_trips = out->copies_d2h + out->stream_syncs + out->event_syncs + out->device_syncs;
}
