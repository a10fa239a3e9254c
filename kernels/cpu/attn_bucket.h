/* attn_bucket.h — the relative-position bucketing of T5 and MPNet (transformers'
 * relative_position_bucket), for the attention kernels of both backends: the bias table
 * [num_buckets, H] is indexed by bucket(j - i) per query i and key j, computed where the
 * score is, so no T x T tensor of buckets or biases exists.
 *
 * For n = i - j (minus the relative position), bidirectional: half the buckets for n < 0
 * (keys after the query), then |n|; otherwise n = max(n, 0) and all the buckets. Of the
 * nb buckets of a side, the first nb/2 are the exact distances 0 .. nb/2 - 1; the others
 * grow logarithmically up to max_distance, beyond which every distance shares the last.
 * transformers computes the logarithmic part in float32; here it is double, which gives the
 * same buckets wherever float32's rounding does not land on an integer (the boundary
 * distances are exact powers of the ratio, where both are exact: tests/ref checks the
 * buckets against transformers' own function). The caller checks nbuckets >= 4 when
 * bidirectional (2 otherwise) and max_distance > the exact half, so no log is of 0. */
#ifndef TR_KERNELS_CPU_ATTN_BUCKET_H
#define TR_KERNELS_CPU_ATTN_BUCKET_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TR_ATTN_BUCKET_FN __host__ __device__ static inline
#else
#define TR_ATTN_BUCKET_FN static inline
#endif

/* The bucket of relative position rel = j - i (key minus query), in [0, nbuckets). */
TR_ATTN_BUCKET_FN int tr_attn_rel_bucket(int64_t rel, int64_t nbuckets, int64_t max_distance, int bidirectional)
{
    int64_t n = -rel, ret = 0, nb = nbuckets;
    if (bidirectional) {
        nb /= 2;
        if (n < 0) ret = nb;
        n = n < 0 ? -n : n;
    } else {
        n = n > 0 ? n : 0;
    }
    int64_t exact = nb / 2;
    if (n < exact) return (int)(ret + n);
    double v = log((double)n / (double)exact) / log((double)max_distance / (double)exact) * (double)(nb - exact);
    int64_t large = v < (double)nb ? exact + (int64_t)v : nb - 1;
    return (int)(ret + (large < nb - 1 ? large : nb - 1));
}

#endif
