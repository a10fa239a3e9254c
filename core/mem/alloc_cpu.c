/* alloc_cpu.c — the CPU raw backend of the caching allocator: segments from aligned
 * malloc, and the growable range (alloc.h) as anonymous memory: address space reserved
 * with no access (which the kernel neither backs nor counts against the commit limit),
 * made readable and writable as the range grows, and given back (its pages dropped, then
 * no access again) as it shrinks. Its pages are touched, and so resident, only as blocks
 * use them, as a segment's are. */
#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

enum { SEG_ALIGN = 256, RANGE_ALIGN = 2097152 };   /* a range's base on a 2 MiB boundary */

static void *cpu_raw_alloc(void *user, size_t size)
{
    (void)user;
    void *p = NULL;
    int rc = posix_memalign(&p, SEG_ALIGN, size);
    return rc == 0 ? p : NULL; /* ENOMEM or EINVAL: the caller reports out of memory */
}

static void cpu_raw_free(void *user, void *ptr, size_t size)
{
    (void)user;
    (void)size;
    free(ptr);
}

/* Address space for *size bytes on a 2 MiB boundary; under an address-space limit
 * (RLIMIT_AS, `ulimit -v`) at most half of it, so that segments, libraries and the heap keep
 * room; halving the ask down to 256 MiB when the system refuses it. The slack around the
 * boundary is unmapped again. */
static void *cpu_range_reserve(void *user, uint64_t *size)
{
    (void)user;
    uint64_t want = *size;
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && want > (uint64_t)lim.rlim_cur / 2)
        want = (uint64_t)lim.rlim_cur / 2 / RANGE_ALIGN * RANGE_ALIGN;
    for (; want >= ((uint64_t)256 << 20); want = want / 2 / RANGE_ALIGN * RANGE_ALIGN) {
        size_t span = (size_t)want + RANGE_ALIGN;
        void *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) continue;
        uintptr_t at = (uintptr_t)p, base = (at + RANGE_ALIGN - 1) / RANGE_ALIGN * RANGE_ALIGN;
        size_t head = (size_t)(base - at), tail = span - head - (size_t)want;
        /* a failed unmap of the slack leaves it reserved with no access: harmless */
        if (head) (void)munmap(p, head);
        if (tail) (void)munmap((void *)(base + want), tail);
        *size = want;
        return (void *)base;
    }
    return NULL;
}

static int cpu_range_grow(void *user, void *base, uint64_t from, uint64_t to)
{
    (void)user;
    return mprotect((char *)base + from, (size_t)(to - from), PROT_READ | PROT_WRITE) == 0 ? 0 : -1;
}

/* The pages go back to the system first (MADV_DONTNEED: a later grow reads zeros), then the
 * access; a failure leaves the range as it was for the allocator (it keeps the bytes). */
static int cpu_range_shrink(void *user, void *base, uint64_t from, uint64_t to)
{
    (void)user;
    char *p = (char *)base + from;
    size_t n = (size_t)(to - from);
    if (madvise(p, n, MADV_DONTNEED) != 0) return -1;
    return mprotect(p, n, PROT_NONE) == 0 ? 0 : -1;
}

static void cpu_range_release(void *user, void *base, uint64_t size)
{
    (void)user;
    (void)munmap(base, (size_t)size);   /* at the allocator's end: nothing left to report to */
}

tr_raw_backend tr_cpu_raw_backend(void)
{
    tr_raw_backend b = { cpu_raw_alloc, cpu_raw_free, NULL, "cpu", NULL, NULL,
                         cpu_range_reserve, cpu_range_grow, cpu_range_shrink, cpu_range_release };
    return b;
}
