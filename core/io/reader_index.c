/* reader_index.c — the offset index of a plain data file (record starts and their line
 * numbers, plus an epoch order over them) and the seeded shuffling both the index and
 * lua/trainer/train/data.lua use.
 *
 * Invariants: offset[i], lineno[i] for i < n are in push order; order[] is either empty
 * (push order) or a permutation of 0..n-1; the shuffle is a pure function of
 * (seed, epoch, purpose, n), identical on every machine (Philox, integer arithmetic and
 * one exactly-rounded double multiply). */
#include "reader.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tr_row_index {
    int64_t *offset;
    int64_t *lineno;
    int64_t *order;        /* NULL: push order */
    int64_t n, cap;
};

/* ------------------------------------------------------------ shuffling */

int64_t tr_shuffle_below(uint64_t seed, uint32_t epoch, uint32_t purpose, uint64_t counter, int64_t n)
{
    if (n <= 1) return 0;
    uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    uint32_t ctr[4] = { epoch, purpose, (uint32_t)counter, (uint32_t)(counter >> 32) };
    uint32_t w[4];
    tr_philox4x32_10(ctr, key, w);
    uint64_t bits = ((uint64_t)w[0] << 21) | (uint64_t)(w[1] >> 11);   /* 53 random bits */
    double u = (double)bits * 0x1p-53;
    int64_t j = (int64_t)floor(u * (double)n);
    return j < n ? j : n - 1;
}

void tr_shuffle_perm(int64_t *perm, int64_t n, uint64_t seed, uint32_t epoch, uint32_t purpose)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = tr_shuffle_below(seed, epoch, purpose, (uint64_t)(n - 1 - i), i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ------------------------------------------------------------ the index */

int tr_row_index_new(tr_row_index **out, tr_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return tr_fail(err, TR_EOOM, "out of host memory creating a row index");
    return TR_OK;
}

void tr_row_index_free(tr_row_index *ix)
{
    if (!ix) return;
    free(ix->offset);
    free(ix->lineno);
    free(ix->order);
    free(ix);
}

int tr_row_index_push(tr_row_index *ix, int64_t offset, int64_t lineno, tr_error *err)
{
    if (ix->n == ix->cap) {
        int64_t cap = ix->cap ? ix->cap * 2 : 1024;
        int64_t *o = realloc(ix->offset, (size_t)cap * sizeof *o);
        if (!o) return tr_fail(err, TR_EOOM, "out of host memory growing a row index to %lld rows", (long long)cap);
        ix->offset = o;
        int64_t *l = realloc(ix->lineno, (size_t)cap * sizeof *l);
        if (!l) return tr_fail(err, TR_EOOM, "out of host memory growing a row index to %lld rows", (long long)cap);
        ix->lineno = l;
        ix->cap = cap;
    }
    free(ix->order);           /* a stale order would not cover the new row */
    ix->order = NULL;
    ix->offset[ix->n] = offset;
    ix->lineno[ix->n] = lineno;
    ix->n++;
    return TR_OK;
}

int64_t tr_row_index_count(const tr_row_index *ix) { return ix->n; }

int64_t tr_row_index_offset(const tr_row_index *ix, int64_t i)
{
    return i >= 0 && i < ix->n ? ix->offset[i] : -1;
}

int64_t tr_row_index_lineno(const tr_row_index *ix, int64_t i)
{
    return i >= 0 && i < ix->n ? ix->lineno[i] : -1;
}

int tr_row_index_set_order(tr_row_index *ix, int32_t shuffle, uint64_t seed, uint32_t epoch, uint32_t purpose,
                           tr_error *err)
{
    free(ix->order);
    ix->order = NULL;
    if (!shuffle || ix->n == 0) return TR_OK;
    ix->order = malloc((size_t)ix->n * sizeof *ix->order);
    if (!ix->order) return tr_fail(err, TR_EOOM, "out of host memory shuffling %lld rows", (long long)ix->n);
    tr_shuffle_perm(ix->order, ix->n, seed, epoch, purpose);
    return TR_OK;
}

int64_t tr_row_index_order(const tr_row_index *ix, int64_t i)
{
    if (i < 0 || i >= ix->n) return -1;
    return ix->order ? ix->order[i] : i;
}
