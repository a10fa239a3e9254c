/* fiber.cpp (cudacpu) — stacks and the context switch of fiber.h. */
#include "fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef CUDACPU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* Pushes the callee-saved registers on the current stack, stores the stack pointer in
 * *save_sp, loads new_sp and pops the registers saved there; ret resumes the new context. */
extern "C" void cudacpu_switch(void **save_sp, void *new_sp);
asm(R"(
.text
.globl cudacpu_switch
.type cudacpu_switch,@function
cudacpu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size cudacpu_switch,.-cudacpu_switch
.section .note.GNU-stack,"",@progbits
.text
)");

namespace cudacpu {

/* Enough for the project's deepest kernel frames (local arrays of a few KiB) many times over,
 * less the colour offset (at most 64 KiB); untouched pages cost nothing (MAP_NORESERVE). */
static const size_t STACK_BYTES = 256 * 1024;
static const size_t GUARD_BYTES = 4096;

void stack_alloc(context &c)
{
    if (c.stack) return;
    char *m = (char *)mmap(nullptr, STACK_BYTES + GUARD_BYTES, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        perror("cudacpu: mmap of a fiber stack");
        abort();
    }
    if (mprotect(m, GUARD_BYTES, PROT_NONE)) {
        perror("cudacpu: mprotect of a fiber stack's guard page");
        abort();
    }
    c.stack = m + GUARD_BYTES;
    c.size = STACK_BYTES;
}

/* Stack tops page-aligned at a fixed stride would all map to the same L1 set (and to 16 sets
 * of L2): with a thousand fibers, every switch missed. 64 cache lines x 16 pages of offsets
 * (at most 64 KiB of the stack) give a thousand threads distinct sets. */
static size_t colour_offset(unsigned colour) { return (size_t)(colour % 64) * 64 + (size_t)(colour / 64 % 16) * 4096; }

void context_start(context &c, void (*entry)(), unsigned colour)
{
#ifdef CUDACPU_ASAN
    if (c.abandoned) __asan_unpoison_memory_region(c.stack, c.size);
    c.abandoned = true; /* until it finishes */
    c.fake_stack = nullptr;
#endif
    uintptr_t top = ((uintptr_t)(c.stack + c.size - colour_offset(colour))) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;         /* entry's return address: entry never returns */
    *--sp = (void *)entry;   /* popped by cudacpu_switch's ret */
    for (int k = 0; k < 6; k++) *--sp = nullptr; /* rbp rbx r12 r13 r14 r15 */
    c.sp = sp;
}

#ifdef CUDACPU_ASAN
/* the host thread's stack as ASan reported it when a fiber was first entered from it */
static thread_local const void *host_bottom;
static thread_local size_t host_size;
static thread_local context *switching_from;
#endif

/* Not instrumented: a finishing fiber never returns from its last switch, so redzones of
 * this frame would stay poisoned on a stack the next block reuses. */
__attribute__((no_sanitize_address)) void context_switch(context &from, context &to, bool from_finishes)
{
#ifdef CUDACPU_ASAN
    if (from_finishes) from.abandoned = false;
    switching_from = &from;
    __sanitizer_start_switch_fiber(from_finishes ? nullptr : &from.fake_stack,
                                   to.stack ? (const void *)to.stack : host_bottom,
                                   to.stack ? to.size : host_size);
#else
    (void)from_finishes;
#endif
    cudacpu_switch(&from.sp, to.sp);
#ifdef CUDACPU_ASAN
    const void *bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(from.fake_stack, &bottom, &size);
    if (!switching_from->stack) host_bottom = bottom, host_size = size;
#endif
}

__attribute__((no_sanitize_address)) void context_entered()
{
#ifdef CUDACPU_ASAN
    const void *bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
    if (!switching_from->stack) host_bottom = bottom, host_size = size;
#endif
}

} // namespace cudacpu
