/* test_device_memory.c — a device's own memory figures beside the caching allocator's
 * (tr_raw_backend.mem_info, as cuda_device.c fills it from cudaMemGetInfo), tested on the CPU
 * with a backend that reports a fake card: tr_alloc_device_memory's arithmetic (outside =
 * total - free - reserved, clamped), the out-of-memory message, the report and the snapshot
 * carry them; the CPU allocator has none (TR_EUSER, zeros) and its texts do not change.
 * Also: the invariant check of an allocator that holds no segment. */
#include "check.h"
#include "trainer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)

/* A 64 MiB card with 40 MiB free before this allocator took anything; what it hands out
 * leaves the free figure, as on a GPU. */
typedef struct card {
    uint64_t total, free_before, handed_out;
    int fail_info;
} card;

static void *card_alloc(void *user, size_t size)
{
    card *c = user;
    if (c->handed_out + size > c->free_before) return NULL;
    c->handed_out += size;
    return aligned_alloc(256, (size + 255) / 256 * 256);
}

static void card_free(void *user, void *p, size_t size)
{
    card *c = user;
    c->handed_out -= size;
    free(p);
}

static int card_info(void *user, uint64_t *total, uint64_t *free_bytes)
{
    card *c = user;
    if (c->fail_info) return -1;
    *total = c->total;
    *free_bytes = c->free_before - c->handed_out;
    return 0;
}

static tr_alloc *card_new(card *c)
{
    *c = (card){ .total = 64 * MiB, .free_before = 40 * MiB };
    tr_raw_backend b = { .raw_alloc = card_alloc, .raw_free = card_free, .user = c, .device_name = "cuda:7",
                         .mem_info = card_info, .device_card = "Fake Card 7, compute capability 7.5" };
    return tr_alloc_new(&b);
}

static void test_figures(void)
{
    card c;
    tr_alloc *a = card_new(&c);
    uint64_t t, f, o;
    CHECK(tr_alloc_device_memory(a, &t, &f, &o) == TR_OK, "mem_info");
    CHECK(t == 64 * MiB && f == 40 * MiB && o == 24 * MiB, "before: %llu %llu %llu", (unsigned long long)t,
          (unsigned long long)f, (unsigned long long)o);
    void *p = NULL;
    tr_error err;
    CHECK(tr_alloc_malloc(a, 5 * MiB, TR_TAG_WEIGHTS, 0, &p, &err) == TR_OK, "%s", err.msg);
    tr_alloc_stats st;
    tr_alloc_get_stats(a, &st);
    CHECK(tr_alloc_device_memory(a, &t, &f, &o) == TR_OK, "mem_info");
    /* the segment the allocator reserved is not "outside": outside stays 24 MiB */
    CHECK(f == 40 * MiB - st.reserved && o == 24 * MiB, "after: free %llu outside %llu reserved %llu",
          (unsigned long long)f, (unsigned long long)o, (unsigned long long)st.reserved);
    c.fail_info = 1;
    CHECK(tr_alloc_device_memory(a, &t, &f, &o) == TR_EUSER && t == 0 && f == 0 && o == 0, "a failed query");
    c.fail_info = 0;
    tr_alloc_free(a, p);
    tr_alloc_destroy(a);
}

static void test_oom_report_snapshot(void)
{
    card c;
    tr_alloc *a = card_new(&c);
    void *p = NULL;
    tr_error err;
    CHECK(tr_alloc_malloc(a, 100 * MiB, TR_TAG_ACTIVATIONS, 0, &p, &err) == TR_EOOM, "100 MiB must not fit");
    CHECK(strstr(err.msg, "out of memory on cuda:7 (Fake Card 7, compute capability 7.5)") != NULL,
          "the message names the card: %s", err.msg);
    CHECK(strstr(err.msg, "The device has 64.00 MiB in all and 40.00 MiB free; 24.00 MiB of it is held outside") !=
              NULL,
          "message: %s", err.msg);
    CHECK(strstr(err.msg, "Ledger:") != NULL, "the ledger still follows: %s", err.msg);
    /* and the allocator recovers */
    CHECK(tr_alloc_malloc(a, MiB, TR_TAG_ACTIVATIONS, 0, &p, &err) == TR_OK, "after the OOM: %s", err.msg);

    char buf[8192];
    tr_alloc_report(a, buf, sizeof buf);
    CHECK(strstr(buf, "device total") && strstr(buf, "64.00 MiB") && strstr(buf, "outside this allocator"),
          "report: %s", buf);

    char path[] = "/tmp/trainer_devmem_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) close(fd);
    CHECK(tr_alloc_snapshot(a, path, &err) == TR_OK, "%s", err.msg);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    json_t *dm = root ? json_object_get(root, "device_memory") : NULL;
    CHECK(dm && json_integer_value(json_object_get(dm, "total")) == (json_int_t)(64 * MiB) &&
              json_integer_value(json_object_get(dm, "outside_allocator")) == (json_int_t)(24 * MiB),
          "snapshot device_memory");
    json_decref(root);
    unlink(path);
    tr_alloc_free(a, p);
    tr_alloc_destroy(a);
}

static void test_cpu_has_none(void)
{
    tr_raw_backend cpu = tr_cpu_raw_backend();
    CHECK(cpu.mem_info == NULL, "the CPU backend has no device figures");
    tr_alloc *a = tr_alloc_new(&cpu);
    uint64_t t = 1, f = 1, o = 1;
    CHECK(tr_alloc_device_memory(a, &t, &f, &o) == TR_EUSER && !t && !f && !o, "CPU: TR_EUSER and zeros");
    char buf[8192];
    tr_alloc_report(a, buf, sizeof buf);
    CHECK(strstr(buf, "device total") == NULL, "the CPU report has no device lines");
    void *p = NULL;
    tr_error err;
    tr_alloc_set_limit(a, MiB);
    CHECK(tr_alloc_malloc(a, 4 * MiB, TR_TAG_WEIGHTS, 0, &p, &err) == TR_EOOM, "over the limit");
    CHECK(strstr(err.msg, "The device has") == NULL, "the CPU's OOM message is unchanged: %s", err.msg);
    tr_alloc_destroy(a);
}

/* An allocator with no segment (fresh, or after empty_cache) passes its own check; the check
 * used to hand qsort a NULL array (found by the CPU dry run of tests/gpu/test_gpu_memory.c). */
static void test_check_with_no_segment(void)
{
    tr_raw_backend cpu = tr_cpu_raw_backend();
    tr_alloc *a = tr_alloc_new(&cpu);
    tr_error err;
    CHECK(tr_alloc_check(a, &err) == TR_OK, "fresh: %s", err.msg);
    void *p = NULL;
    CHECK(tr_alloc_malloc(a, 3 * MiB, TR_TAG_GRADS, 0, &p, &err) == TR_OK, "%s", err.msg);
    tr_alloc_free(a, p);
    tr_alloc_empty_cache(a);
    CHECK(tr_alloc_check(a, &err) == TR_OK, "after empty_cache: %s", err.msg);
    tr_alloc_destroy(a);
}

int main(void)
{
    RUN(test_check_with_no_segment);
    RUN(test_figures);
    RUN(test_oom_report_snapshot);
    RUN(test_cpu_has_none);
    return check_done();
}
