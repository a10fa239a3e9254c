/* index_check.h — the device check of index tensors (index_check.cu) and the device error word
 * it fills; host launchers with C linkage and no CUDA types, under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_INDEX_CHECK_H
#define TR_KERNELS_CUDA_INDEX_CHECK_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* The device's error word (one per device, core/cuda_device/cuda_device.h): the first bad index an
 * op's check found, 0 in op while there is none. The ops that check (tr_k_index_op) are named
 * by the host when it reads the word (core/cuda_device/device_errors.c). */
typedef struct tr_k_index_error {
    int64_t op;            /* 0: no error; else a tr_k_index_op */
    int64_t value;         /* the bad index */
    int64_t position;      /* its position among the op's indices (flattened) */
    int64_t limit;         /* the valid indices are [0, limit) */
    int64_t ignore_index;  /* cross-entropy's: also valid */
} tr_k_index_error;

typedef enum tr_k_index_op {
    TR_K_INDEX_EMBEDDING = 1,
    TR_K_INDEX_EMBEDDING_BACKWARD = 2,
    TR_K_INDEX_CROSS_ENTROPY = 3,
    TR_K_INDEX_CROSS_ENTROPY_BACKWARD = 4
} tr_k_index_op;

/* out[n] (=, int64) = idx[n] (i32 or i64), each bad index (outside [0, limit) and not the
 * ignore index when has_ignore) replaced by the ignore index (has_ignore) or -1; *count (=,
 * may be NULL) = the indices neither bad nor ignored; the first bad one goes into *word
 * (op, value, position, limit, ignore_index) unless word->op is set already. One block:
 * nothing waits for the host. */
int tr_k_check_indices_cuda(int64_t *out, const void *idx, int idx_dt, int64_t n, int64_t limit,
                            int64_t ignore_index, int has_ignore, int64_t *count, tr_k_index_error *word,
                            int64_t op, void *stream, tr_error *err);

TR_K_END_DECLS

#endif
