/* test_tensor_device.c — tensor data movement that involves a GPU, as far as it runs without
 * one (this program is the ASan build, which has no CUDA backend): every entry point of
 * core/tensor/tensor.c that reaches core/cuda_device/cuda_copy.c fails with TR_EUSER and a
 * message that names the function, the direction and the device and says the build lacks
 * CUDA; the checks of tensor.c still come first; the CPU path is unchanged (copy with
 * conversion, fill, write/read, write_converted from an unaligned buffer). The GPU itself is
 * tested by tests/gpu/test_gpu_memory.c. */
#include "check.h"
#include "trainer.h"

#include <string.h>

/* A header that claims to live on cuda:0 (no storage: never freed, never dereferenced). */
static tr_tensor fake_device_tensor(float *backing, int64_t n, int dtype)
{
    tr_tensor t;
    memset(&t, 0, sizeof t);
    t.data = backing;
    t.ndim = 1;
    t.shape[0] = n;
    t.numel = n;
    t.dtype = dtype;
    t.device = 0;
    t.tag = TR_TAG_ACTIVATIONS;
    return t;
}

static int says(const tr_ctx *ctx, const char *a, const char *b)
{
    const char *m = tr_ctx_errmsg(ctx);
    return strstr(m, a) != NULL && strstr(m, b) != NULL;
}

static void test_new_on_device_says_no_cuda(void)
{
    tr_ctx *ctx = tr_ctx_new();
    int64_t shape[1] = { 4 };
    CHECK(tr_tensor_new(ctx, 1, shape, TR_F32, 0, TR_TAG_WEIGHTS) == NULL, "a cuda:0 tensor was made");
    CHECK(tr_ctx_err(ctx)->status == TR_EUSER, "status %d", tr_ctx_err(ctx)->status);
    CHECK(says(ctx, "cuda:0", "no CUDA backend"), "message: %s", tr_ctx_errmsg(ctx));
    tr_ctx_free(ctx);
}

static void test_copy_messages(void)
{
    tr_ctx *ctx = tr_ctx_new();
    int64_t shape[1] = { 4 };
    tr_tensor *h = tr_tensor_zeros(ctx, 1, shape, TR_F32, TR_CPU, TR_TAG_ACTIVATIONS);
    float backing[4] = { 0 };
    tr_tensor d = fake_device_tensor(backing, 4, TR_BF16);
    CHECK(tr_tensor_copy(ctx, &d, h) == TR_EUSER, "copy to cuda:0 must fail");
    CHECK(says(ctx, "tr_tensor_copy to cuda:0", "no CUDA backend"), "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_copy(ctx, h, &d) == TR_EUSER, "copy from cuda:0 must fail");
    CHECK(says(ctx, "tr_tensor_copy from cuda:0", "CUDA=0"), "message: %s", tr_ctx_errmsg(ctx));
    /* the element-count check still comes first */
    tr_tensor d3 = fake_device_tensor(backing, 3, TR_F32);
    CHECK(tr_tensor_copy(ctx, &d3, h) == TR_EUSER, "numel mismatch must fail");
    CHECK(says(ctx, "has 3 elements", "has 4"), "message: %s", tr_ctx_errmsg(ctx));
    /* overlapping device ranges are refused before any CUDA call */
    tr_tensor d2 = fake_device_tensor(backing + 1, 2, TR_F32), d2b = fake_device_tensor(backing, 2, TR_F32);
    CHECK(tr_tensor_copy(ctx, &d2, &d2b) == TR_EUSER, "overlap must fail");
    CHECK(says(ctx, "overlap", "cuda:0"), "message: %s", tr_ctx_errmsg(ctx));
    /* a tensor copied onto itself is a no-op, with or without a GPU */
    CHECK(tr_tensor_copy(ctx, &d2, &d2) == TR_OK, "self copy: %s", tr_ctx_errmsg(ctx));
    tr_tensor_free(h);
    tr_ctx_free(ctx);
}

static void test_fill_write_read_messages(void)
{
    tr_ctx *ctx = tr_ctx_new();
    float backing[4] = { 0 }, host[4] = { 1, 2, 3, 4 };
    tr_tensor d = fake_device_tensor(backing, 4, TR_F32);
    CHECK(tr_tensor_fill(ctx, &d, 1.5) == TR_EUSER, "fill on cuda:0 must fail");
    CHECK(says(ctx, "tr_tensor_fill on cuda:0", "no CUDA backend"), "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_write(ctx, &d, host, sizeof host) == TR_EUSER, "write must fail");
    CHECK(says(ctx, "tr_tensor_write to cuda:0", "no CUDA backend"), "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_read(ctx, &d, host, sizeof host) == TR_EUSER, "read must fail");
    CHECK(says(ctx, "tr_tensor_read from cuda:0", "no CUDA backend"), "message: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_write_converted(ctx, &d, host, TR_F32, 4) == TR_EUSER, "write_converted must fail");
    CHECK(says(ctx, "tr_tensor_write to cuda:0", "no CUDA backend"), "message: %s", tr_ctx_errmsg(ctx));
    /* the size check still comes first, and the backing memory was never touched */
    CHECK(tr_tensor_write(ctx, &d, host, 3) == TR_EUSER && says(ctx, "3 bytes given", "16 bytes"), "message: %s",
          tr_ctx_errmsg(ctx));
    for (int i = 0; i < 4; i++) CHECK(backing[i] == 0.0f, "backing[%d] = %g was written", i, backing[i]);
    tr_ctx_free(ctx);
}

static void test_cpu_path_unchanged(void)
{
    tr_ctx *ctx = tr_ctx_new();
    int64_t shape[1] = { 5 };
    tr_tensor *a = tr_tensor_new(ctx, 1, shape, TR_F32, TR_CPU, TR_TAG_WEIGHTS);
    tr_tensor *b = tr_tensor_new(ctx, 1, shape, TR_BF16, TR_CPU, TR_TAG_WEIGHTS);
    float v[5] = { 1.0f, -2.5f, 3.0f, 0.1f, 65504.0f }, back[5];
    CHECK(tr_tensor_write(ctx, a, v, sizeof v) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_copy(ctx, b, a) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    uint16_t bits[5];
    CHECK(tr_tensor_read(ctx, b, bits, sizeof bits) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 5; i++) CHECK(bits[i] == tr_f32_to_bf16(v[i]), "bf16 bits of %g", v[i]);
    CHECK(tr_tensor_fill(ctx, a, -7.0) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_read(ctx, a, back, sizeof back) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 5; i++) CHECK(back[i] == -7.0f, "fill: back[%d] = %g", i, back[i]);

    /* write_converted: bf16 host bits from an odd address into f32 (bounced, never a misaligned load) */
    unsigned char raw[1 + 10];
    memcpy(raw + 1, bits, sizeof bits);
    CHECK(tr_tensor_write_converted(ctx, a, raw + 1, TR_BF16, 5) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_read(ctx, a, back, sizeof back) == TR_OK, "%s", tr_ctx_errmsg(ctx));
    for (int i = 0; i < 5; i++) CHECK(back[i] == tr_bf16_to_f32(bits[i]), "write_converted[%d] = %g", i, back[i]);
    CHECK(tr_tensor_write_converted(ctx, a, v, TR_F32, 4) == TR_EUSER && strstr(tr_ctx_errmsg(ctx), "4 host elements"),
          "numel mismatch: %s", tr_ctx_errmsg(ctx));
    CHECK(tr_tensor_write_converted(ctx, a, v, 9, 5) == TR_EUSER, "bad host dtype must fail");
    tr_tensor_free(a);
    tr_tensor_free(b);
    tr_ctx_free(ctx);
}

int main(void)
{
    RUN(test_new_on_device_says_no_cuda);
    RUN(test_copy_messages);
    RUN(test_fill_write_read_messages);
    RUN(test_cpu_path_unchanged);
    return check_done();
}
