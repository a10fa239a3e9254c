/* safetensors.h — reading and writing Hugging Face safetensors files, single and sharded.
 *
 * Format: 8 bytes little-endian u64 N, then N bytes of UTF-8 JSON (an object mapping each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
 * "__metadata__" object of string values), then the data: every tensor's bytes,
 * little-endian, row-major, contiguous from offset 0 to the end of the file.
 *
 * Reader invariants (checked at open, each failure is TR_EUSER naming the file and what is
 * wrong): N <= 100,000,000 and 8 + N <= file size; the header is valid UTF-8 and JSON
 * (parsed by jansson) whose top level is an object (JSON whitespace may precede it, as the
 * reference reader allows) with no duplicate names; every dtype is
 * known; shapes are non-negative integers of at most 8 dimensions; numel x dtype bits is a
 * whole number of bytes without overflow and equals end - begin; sorted by offset, the
 * tensors tile [0, data size) with neither gap nor overlap, and the last one ends exactly
 * at the end of the file. After a successful open every tensor's bytes lie inside the
 * mapping, and the data pointers stay valid until tr_st_close. The file is mapped
 * read-only (zero-copy); tensors are listed in file (offset) order, indices from 0.
 *
 * Writer: tensors ordered as the reference (Rust) writer orders them (dtype from widest to
 * narrowest in the reference's dtype order, then name in byte order), header JSON without
 * whitespace padded with spaces to a multiple of 8 bytes, "__metadata__" with
 * "format": "pt" first. The file appears atomically (PATH.tmp, fsync, rename): on failure
 * no PATH.tmp remains and an existing PATH is untouched. */
#ifndef TR_SAFETENSORS_H
#define TR_SAFETENSORS_H

#include "tr_base.h"

/* ------------------------------------------------------------ dtypes */

/* Bits per element of a safetensors dtype name ("F32" 32, "F4" 4, "BOOL" 8, ...); 0 when
 * the name is not a safetensors dtype. */
int32_t tr_st_dtype_bits(const char *name);
/* Position of a dtype in the reference implementation's Dtype enum (BOOL 0, F4 1, ...,
 * U64 21), which orders tensors in a written file (higher first); -1 when unknown. */
int32_t tr_st_dtype_order(const char *name);
/* The runtime dtype (tr_dtype) for a safetensors dtype name; -1 when the runtime has none. */
int32_t tr_st_dtype_to_tr(const char *name);
/* The safetensors dtype name for a tr_dtype ("F32", "BF16", ...); NULL for an unknown one. */
const char *tr_st_dtype_from_tr(int32_t dtype);

/* ------------------------------------------------------------ reading one file */

typedef struct tr_st_file tr_st_file;

/* One tensor of an open file (or of a sharded set). Strings and data belong to the file. */
typedef struct tr_st_info {
    const char *name;
    const char *dtype_name;  /* as in the header: "F32", "BF16", "F8_E4M3", ... */
    int32_t dtype;           /* tr_dtype, or -1 when the runtime has no such dtype */
    int32_t ndim;            /* 0..8 */
    int64_t shape[8];        /* unused dimensions are 0 */
    int64_t numel;
    const void *data;        /* into the read-only mapping; may be unaligned for files
                              * written by other tools */
    size_t nbytes;
    uint64_t offset;         /* of the first byte, from the start of the file */
    int32_t shard;           /* index of the shard holding it (0 for a single file) */
} tr_st_info;

/* Maps and validates PATH. On success *out is the open file; on failure *out is NULL and
 * err says what is wrong (TR_EUSER for anything in the file, TR_EOOM / TR_EINTERNAL for
 * the system). */
int tr_st_open(tr_st_file **out, const char *path, tr_error *err);
/* Unmaps and frees; every pointer obtained from the file dies. NULL is a no-op. */
void tr_st_close(tr_st_file *f);

const char *tr_st_path(const tr_st_file *f);
size_t tr_st_count(const tr_st_file *f);
/* Fills *out with tensor i (file order). TR_EUSER, *out untouched, when i >= count. */
int tr_st_get(const tr_st_file *f, size_t i, tr_st_info *out);
/* Index of the tensor called NAME, or -1. */
int64_t tr_st_find(const tr_st_file *f, const char *name);
/* tr_st_find + tr_st_get; TR_EUSER with a message naming the file when there is none. */
int tr_st_lookup(const tr_st_file *f, const char *name, tr_st_info *out, tr_error *err);

/* "__metadata__": the value for KEY or NULL; and the pairs in header order. */
const char *tr_st_metadata(const tr_st_file *f, const char *key);
size_t tr_st_metadata_count(const tr_st_file *f);
int tr_st_metadata_at(const tr_st_file *f, size_t i, const char **key, const char **value);

/* ------------------------------------------------------------ reading a sharded folder */

typedef struct tr_st_sharded tr_st_sharded;

/* PATH is a model folder or an index file. A folder with model.safetensors.index.json
 * opens every shard its "weight_map" names (each once); a folder without one opens its
 * model.safetensors as the only shard. Every name in the weight map must exist in the
 * shard it names; a missing or invalid shard is TR_EUSER naming it. Tensors are listed in
 * weight-map order; tensors a shard holds beyond the weight map are not listed. */
int tr_st_sharded_open(tr_st_sharded **out, const char *path, tr_error *err);
void tr_st_sharded_close(tr_st_sharded *s);

size_t tr_st_sharded_count(const tr_st_sharded *s);
int tr_st_sharded_get(const tr_st_sharded *s, size_t i, tr_st_info *out);
int64_t tr_st_sharded_find(const tr_st_sharded *s, const char *name);
int tr_st_sharded_lookup(const tr_st_sharded *s, const char *name, tr_st_info *out, tr_error *err);
size_t tr_st_sharded_nshards(const tr_st_sharded *s);
/* The open file of shard k (its metadata, its path); NULL when k is out of range. */
const tr_st_file *tr_st_sharded_shard(const tr_st_sharded *s, size_t k);

/* ------------------------------------------------------------ writing */

/* One tensor to write: DATA holds numel x dtype bits / 8 bytes (row-major, little-endian),
 * read during the call only. NULL data is allowed only for zero bytes. */
typedef struct tr_st_entry {
    const char *name;
    const char *dtype;       /* safetensors dtype name; tr_st_dtype_from_tr converts */
    int32_t ndim;            /* 0..8 */
    int64_t shape[8];
    const void *data;
} tr_st_entry;

/* Writes the N entries to PATH atomically. METADATA holds N_METADATA key/value pairs as
 * 2 x N_METADATA strings (key0, value0, key1, ...), may be NULL when N_METADATA is 0;
 * they follow "format": "pt" in "__metadata__" in the order given (a "format" key among
 * them replaces the "pt"). Names must be distinct, non-empty UTF-8 and not
 * "__metadata__". */
int tr_st_write(const char *path, const tr_st_entry *entries, size_t n,
                const char *const *metadata, size_t n_metadata, tr_error *err);

struct tr_ctx;      /* core/ctx/ctx.h */
struct tr_tensor;   /* core/tensor/tensor.h */

/* As tr_st_write, but entry i's bytes come from tensors[i] when that is non-NULL: a tensor
 * of ctx on any device, of exactly the entry's byte count, read a chunk of at most 8 MiB at
 * a time (tr_tensor_read_range), so that saving a GPU's weights needs no host copy of them
 * (entries[i].data must then be non-NULL, as for any entry, and is not read). tensors may
 * be NULL (then this is tr_st_write). An error of the tensor read is TR_EINTERNAL naming
 * the file and the tensor; the file is not written. */
int tr_st_write_tensors(struct tr_ctx *ctx, const char *path, const tr_st_entry *entries,
                        const struct tr_tensor *const *tensors, size_t n, const char *const *metadata,
                        size_t n_metadata, tr_error *err);

/* Writes the entries into folder DIR as transformers does: everything as
 * model.safetensors when it fits in MAX_SHARD_BYTES of data, else shards
 * model-00001-of-0000K.safetensors filled in entry order (a new shard starts when the next
 * tensor would pass the limit; a tensor larger than the limit gets a shard of its own) and
 * model.safetensors.index.json {"metadata": {"total_size": B}, "weight_map": {...}}
 * with names sorted, written last. Each file is written atomically. DIR must exist. After
 * success, files of an earlier save that a reader would mix in are removed (the index and
 * shards after a single-file save; model.safetensors and shards of another count after a
 * sharded one). */
int tr_st_write_sharded(const char *dir, const tr_st_entry *entries, size_t n,
                        const char *const *metadata, size_t n_metadata, uint64_t max_shard_bytes,
                        tr_error *err);

#endif
