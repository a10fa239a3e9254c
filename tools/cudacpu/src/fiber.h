/* fiber.h (cudacpu) — user-level contexts: a stack each with a guard page below it (an
 * overflow faults instead of corrupting the next stack), a switch that saves only the
 * callee-saved registers (x86-64 SysV: the switch is a call, so the rest are the caller's),
 * and the notes AddressSanitizer needs to follow a switch between stacks.
 *
 * Invariants: a context is started once per use (context_start) and switched to only while
 * suspended; a context whose function returned (or was abandoned mid-way) must be started
 * again before it runs. Under ASan a stack abandoned mid-way keeps its frames' poison, so
 * context_start clears it for such a stack only (clearing 256 KiB of shadow per thread per
 * block is what made ASan runs slow). */
#ifndef CUDACPU_FIBER_H
#define CUDACPU_FIBER_H

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define CUDACPU_ASAN 1
#endif

namespace cudacpu {

struct context {
    void *sp = nullptr;
    char *stack = nullptr; /* usable area, above the guard page; null for a host thread's own stack */
    size_t size = 0;
#ifdef CUDACPU_ASAN
    void *fake_stack = nullptr;
    bool abandoned = false; /* started and not finished: its stack's shadow may hold poison */
#endif
};

/* Gives c its own stack (once; aborts with a message when the system refuses memory). */
void stack_alloc(context &c);
/* Prepares c so that the next switch to it calls entry() on its own stack. entry never returns.
 * colour: a small number that differs between contexts used together (their index): it
 * offsets the stack's top, so that the tops of many stacks do not fall in one cache set. */
void context_start(context &c, void (*entry)(), unsigned colour);
/* Saves the running code's state in from and resumes to; returns when something switches back
 * to from. from_finishes: from will never be resumed (its stack may be reused). */
void context_switch(context &from, context &to, bool from_finishes);
/* The first thing entry() calls, on its new stack. */
void context_entered();

} // namespace cudacpu

#endif
