/* alloc.h — the caching allocator, one instance per device, generic over a raw
 * alloc/free pair (malloc on the CPU, cudaMalloc on a GPU), so that its behaviour is
 * tested on the CPU exactly as it runs on the GPU.
 *
 * Policy (PyTorch's CUDA caching allocator as the baseline):
 *   - request sizes are rounded up to 512 B;
 *   - requests <= 1 MiB come from 2 MiB segments (the small pool); 1-10 MiB from 20 MiB
 *     segments; larger requests get a segment of their size rounded up to 2 MiB
 *     (these two form the large pool);
 *   - best fit among cached free blocks of the same pool (and stream);
 *   - a block is split when the remainder is >= 512 B (small pool) or > 1 MiB (large
 *     pool), and large blocks only when below max_split_size;
 *   - freed neighbours within a segment coalesce;
 *   - when the raw allocation fails, or would pass the limit, the cached segments with no
 *     live block are released and the allocation is retried once before failing;
 *   - on a backend with a growable range (the CPU's), the large pool of the first stream it
 *     serves lives in one address range instead of segments (PyTorch's expandable
 *     segments): best fit among its free blocks but the free end, else the free end, grown
 *     by what it lacks (in 2 MiB steps). A freed block that a smaller, longer-lived tensor
 *     then split is no longer a stranded segment, so the memory held tracks the live bytes
 *     closer. Emptying the cache returns the range's free end; a full or refused
 *     reservation leaves the requests to segments.
 * Every allocation carries a tag; current and peak bytes are kept per tag.
 * Out of memory returns TR_EOOM with a message that carries the request, the tag, the
 * limit, the per-tag ledger, reserved vs allocated, the largest free block, and which
 * recipe key shrinks which tag; the allocator stays usable afterwards. */
#ifndef TR_ALLOC_H
#define TR_ALLOC_H

#include "tr_base.h"

/* The raw backend: alloc returns NULL on failure (never aborts). `stream` is 0 on the
 * CPU; on CUDA a cudaStream_t cast to uintptr_t. */
typedef struct tr_raw_backend {
    void *(*raw_alloc)(void *user, size_t size);
    void (*raw_free)(void *user, void *ptr, size_t size);
    void *user;
    const char *device_name;   /* "cpu", "cuda:0": used in messages and reports */
    /* Optional (NULL on the CPU): the device's total and free bytes as its driver counts
     * them (cudaMemGetInfo), 0 on success. Shown beside the allocator's own figures in the
     * out-of-memory message, the report and the snapshot, so that they match nvidia-smi. */
    int (*mem_info)(void *user, uint64_t *total, uint64_t *free_bytes);
    const char *device_card;   /* optional: the card, "NVIDIA A10, compute capability 8.6", shown
                                * beside the name in the out-of-memory message and the report */
    /* Optional, all four or none (none on CUDA): one address range that grows in place.
     * range_reserve takes address space for up to *size bytes, with no memory behind it,
     * sets *size to what it took and returns its base (NULL: none); range_grow makes
     * [base + from, base + to) usable and range_shrink gives it back to the system (0 on
     * success); range_release returns the whole reservation. */
    void *(*range_reserve)(void *user, uint64_t *size);
    int (*range_grow)(void *user, void *base, uint64_t from, uint64_t to);
    int (*range_shrink)(void *user, void *base, uint64_t from, uint64_t to);
    void (*range_release)(void *user, void *base, uint64_t size);
} tr_raw_backend;

typedef struct tr_alloc tr_alloc;

typedef struct tr_alloc_stats {
    uint64_t allocated, reserved;              /* bytes now: live blocks; raw segments */
    uint64_t peak_allocated, peak_reserved;
    uint64_t requested;                        /* bytes asked for (before rounding), live */
    uint64_t tag_allocated[5];                 /* per tr_tag, live bytes (rounded sizes) */
    uint64_t tag_peak[5];
    uint64_t pool_allocated[2], pool_reserved[2];   /* [0] small pool, [1] large pool */
    uint64_t pool_peak_allocated[2], pool_peak_reserved[2];
    uint64_t n_alloc, n_free;                  /* calls served */
    uint64_t n_raw_alloc, n_raw_free;          /* segments obtained from / returned to backend */
    uint64_t n_retries, n_ooms;
    uint64_t n_segments, n_live_blocks;
    uint64_t largest_free;                     /* largest cached free block */
    uint64_t inactive_split;                   /* free bytes inside segments that also hold live blocks */
    uint64_t limit;                            /* 0 = none */
    uint64_t max_split_size;                   /* UINT64_MAX = none */
} tr_alloc_stats;

/* Creation copies the backend. NULL only when malloc itself fails. */
tr_alloc *tr_alloc_new(const tr_raw_backend *backend);
/* Returns every segment to the backend; live blocks are freed with them. */
void tr_alloc_destroy(tr_alloc *a);

/* *out = a block of at least `size` bytes, 256-byte aligned. size 0 gives a valid
 * unique 512-byte block. On failure *out = NULL, returns TR_EOOM and fills err. */
int tr_alloc_malloc(tr_alloc *a, size_t size, int tag, uintptr_t stream, void **out, tr_error *err);
/* Returns ptr (from tr_alloc_malloc on this allocator; NULL is a no-op) to the cache. */
void tr_alloc_free(tr_alloc *a, void *ptr);
/* Size a live block was rounded to; 0 if ptr is not live here. */
size_t tr_alloc_block_size(const tr_alloc *a, const void *ptr);

/* 0 = no limit. A limit below `reserved` applies to later growth. */
void tr_alloc_set_limit(tr_alloc *a, uint64_t bytes);
/* Large blocks at least this big are never split (default: no maximum). */
void tr_alloc_set_max_split_size(tr_alloc *a, uint64_t bytes);
/* on = 0: every request becomes a segment of its own at its exact size, returned to the
 * backend at its free (what TRAINER_NO_MEMORY_CACHING=1 sets at creation), so that a memory
 * checker behind the backend sees every overrun; blocks already cached stay until
 * tr_alloc_empty_cache. on = 1: the caching policy above (the default). */
void tr_alloc_set_caching(tr_alloc *a, int on);
/* Releases every segment that holds no live block back to the backend, and the free end
 * of the growable range. */
void tr_alloc_empty_cache(tr_alloc *a);
/* Peaks (overall, per tag, per pool) restart from the current values. */
void tr_alloc_reset_peak(tr_alloc *a);
void tr_alloc_get_stats(const tr_alloc *a, tr_alloc_stats *out);

/* The device's memory beside the allocator's: total and free as the driver counts them,
 * and `outside` = total - free - reserved (clamped at 0): what the CUDA context, libraries
 * and other processes hold. TR_EUSER, outputs 0, when the backend cannot say (the CPU). */
int tr_alloc_device_memory(const tr_alloc *a, uint64_t *total, uint64_t *free_bytes, uint64_t *outside);

/* A human-readable table like torch.cuda.memory_summary() but by tag. Writes at most
 * len bytes (NUL-terminated) and returns the length the full report needs. */
size_t tr_alloc_report(const tr_alloc *a, char *buf, size_t len);
/* JSON snapshot: segments with their blocks (offset, size, tag, live/free) and the ring
 * of recent events. Written atomically (temporary file + rename). */
int tr_alloc_snapshot(const tr_alloc *a, const char *path, tr_error *err);

/* Invariant check for tests: no overlapping live blocks, stats equal the sums of live
 * blocks (per tag too), reserved equals the sum of segments, no two adjacent free
 * blocks in a segment. Returns TR_OK or TR_EINTERNAL with what was violated. */
int tr_alloc_check(const tr_alloc *a, tr_error *err);

/* The CPU raw backend: aligned malloc/free, and a growable range of anonymous memory
 * (mmap, mprotect, madvise: alloc_cpu.c). */
tr_raw_backend tr_cpu_raw_backend(void);

#endif
