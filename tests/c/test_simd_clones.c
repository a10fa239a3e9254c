/* test_simd_clones.c — the clone that the loader picks for a TR_SIMD_CLONES function
 * (kernels/cpu/fast_math.h) is the widest this CPU runs: avx512f with AVX-512, the x86-64-v3
 * (AVX2 + FMA) clone on any other CPU of that level, AMD's included, the baseline elsewhere.
 * (Clones of "arch=haswell" were picked by the CPU's model: every AMD CPU without AVX-512 ran
 * the SSE2 baseline of every hot loop.) The resolver GCC makes for the function below is
 * called directly and its answer compared with the clones' addresses; GCC on x86-64 Linux
 * only (elsewhere TR_SIMD_CLONES is empty: SKIP). */
#include <stdint.h>

#include "check.h"
#include "cpu/fast_math.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define HAVE_CLONES 1

TR_SIMD_CLONES __attribute__((noinline, used)) void tr_test_clone_scale(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] *= 2;
}

/* GCC's names for the clones and the resolver (this file's own local symbols) */
extern void clone_avx512(float *, int64_t) __asm__("tr_test_clone_scale.avx512f");
extern void clone_v3(float *, int64_t) __asm__("tr_test_clone_scale.arch_x86_64_v3");
extern void clone_default(float *, int64_t) __asm__("tr_test_clone_scale.default");
extern void *clone_resolver(void) __asm__("tr_test_clone_scale.resolver");
#endif

static void test_simd_clones_pick_the_widest_isa(void)
{
#ifdef HAVE_CLONES
    __builtin_cpu_init();
    void *got = clone_resolver();
    const char *want_name = "default";
    void *want = (void *)clone_default;
    if (__builtin_cpu_supports("avx512f")) {
        want_name = "avx512f";
        want = (void *)clone_avx512;
    } else if (__builtin_cpu_supports("x86-64-v3")) {
        want_name = "arch_x86_64_v3";
        want = (void *)clone_v3;
    }
    CHECK(got == want, "the resolver picked %s, not the %s clone",
          got == (void *)clone_avx512 ? "avx512f" : got == (void *)clone_v3 ? "arch_x86_64_v3"
          : got == (void *)clone_default ? "default" : "an unknown address", want_name);
    /* an AVX2 + FMA CPU (this project's AMD EPYC) never runs the baseline */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("x86-64-v3"))
        CHECK(got != (void *)clone_default, "an AVX2 + FMA CPU got the baseline clone");
    float x[5] = { 1, 2, 3, 4, 5 };
    tr_test_clone_scale(x, 5);
    CHECK(x[0] == 2 && x[4] == 10, "the picked clone computes: %g %g", x[0], x[4]);
#else
    printf("SKIP test_simd_clones_pick_the_widest_isa: TR_SIMD_CLONES is empty for this compiler or target\n");
#endif
}

int main(void)
{
    RUN(test_simd_clones_pick_the_widest_isa);
    return check_done();
}
