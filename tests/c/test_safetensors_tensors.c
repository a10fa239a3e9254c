/* test_safetensors_tensors.c — tr_st_write_tensors: entries whose bytes come from tensors,
 * read a chunk at a time (the path that saves a GPU's weights without a host copy of them),
 * run here with CPU tensors, whose chunked path is the same code: the file is byte-identical
 * to tr_st_write's from the same data (a tensor larger than the 8 MiB chunk, one that is not
 * a multiple of it, mixed with plain entries); a byte count that disagrees with the entry is
 * TR_EUSER; a tensor that cannot be read (a header claiming cuda:0 in this build without
 * CUDA) is an error naming the file and the tensor, and leaves neither the file nor PATH.tmp. */
#include "check.h"
#include "file_check.h"
#include "trainer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void test_same_bytes_as_plain_write(void)
{
    tr_ctx *ctx = tr_ctx_new();
    int64_t big_shape[2] = { 3000, 1001 }, small_shape[1] = { 7 };   /* 12 MB: two chunks, the last partial */
    tr_tensor *big = tr_tensor_new(ctx, 2, big_shape, TR_F32, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *small = tr_tensor_new(ctx, 1, small_shape, TR_BF16, TR_CPU, TR_TAG_WEIGHTS);
    CHECK(big && small, "%s", tr_ctx_errmsg(ctx));
    if (!big || !small) return;
    for (int64_t i = 0; i < big->numel; i++) ((float *)big->data)[i] = (float)i * 0.5f - 7.0f;
    for (int64_t i = 0; i < small->numel; i++) ((uint16_t *)small->data)[i] = (uint16_t)(0x3f80 + i);
    int32_t ids[3] = { 4, 5, 6 };
    tr_st_entry e[3];
    memset(e, 0, sizeof e);
    e[0] = (tr_st_entry){ .name = "big", .dtype = "F32", .ndim = 2, .shape = { 3000, 1001 }, .data = big->data };
    e[1] = (tr_st_entry){ .name = "small", .dtype = "BF16", .ndim = 1, .shape = { 7 }, .data = small->data };
    e[2] = (tr_st_entry){ .name = "ids", .dtype = "I32", .ndim = 1, .shape = { 3 }, .data = ids };
    const tr_tensor *src[3] = { big, small, NULL };
    const char *meta[] = { "k", "v" };
    char a[] = "/tmp/trainer_st_plain_XXXXXX", b[] = "/tmp/trainer_st_tensors_XXXXXX";
    int fa = mkstemp(a), fb = mkstemp(b);
    if (fa >= 0) close(fa);
    if (fb >= 0) close(fb);
    tr_error err;
    CHECK(tr_st_write(a, e, 3, meta, 1, &err) == TR_OK, "plain: %s", err.msg);
    CHECK(tr_st_write_tensors(ctx, b, e, src, 3, meta, 1, &err) == TR_OK, "tensors: %s", err.msg);
    size_t la = 0, lb = 0;
    unsigned char *pa = fc_slurp(a, &la), *pb = fc_slurp(b, &lb);
    CHECK(pa && pb && la == lb && la > 12000000 && memcmp(pa, pb, la) == 0, "files differ (%zu vs %zu bytes)", la, lb);
    free(pa);
    free(pb);

    /* a tensor whose size disagrees with its entry */
    e[1].shape[0] = 6;
    CHECK(tr_st_write_tensors(ctx, b, e, src, 3, NULL, 0, &err) == TR_EUSER && strstr(err.msg, "small") &&
              strstr(err.msg, "12 bytes but its tensor holds 14"),
          "mismatch: %s", err.msg);
    e[1].shape[0] = 7;
    /* no context for tensor sources */
    CHECK(tr_st_write_tensors(NULL, b, e, src, 3, NULL, 0, &err) == TR_EUSER, "no ctx must fail");
    unlink(a);
    unlink(b);
    tr_tensor_free(big);
    tr_tensor_free(small);
    tr_ctx_free(ctx);
}

static void test_unreadable_tensor_leaves_no_file(void)
{
    tr_ctx *ctx = tr_ctx_new();
    float backing[4] = { 0 };
    tr_tensor fake;
    memset(&fake, 0, sizeof fake);
    fake.data = backing;
    fake.ndim = 1;
    fake.shape[0] = 4;
    fake.numel = 4;
    fake.dtype = TR_F32;
    fake.device = 0;
    tr_st_entry e = { .name = "w", .dtype = "F32", .ndim = 1, .shape = { 4 }, .data = backing };
    const tr_tensor *src[1] = { &fake };
    char path[] = "/tmp/trainer_st_fail_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    unlink(path);
    tr_error err;
    int rc = tr_st_write_tensors(ctx, path, &e, src, 1, NULL, 0, &err);
    CHECK(rc != TR_OK && strstr(err.msg, path) && strstr(err.msg, "tensor 'w'") &&
              strstr(err.msg, "tr_tensor_read from cuda:0"),
          "rc %d: %s", rc, err.msg);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(!exists(path) && !exists(tmp), "a file was left behind");
    tr_ctx_free(ctx);
}

int main(void)
{
    RUN(test_same_bytes_as_plain_write);
    RUN(test_unreadable_tensor_leaves_no_file);
    return check_done();
}
