/* bench_clock.h — what the C benchmarks share: a clock read in seconds and the number of
 * threads OpenMP runs. Header-only and static; each benchmark program gets its own copy. */
#ifndef TR_BENCH_CLOCK_H
#define TR_BENCH_CLOCK_H

#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The clock's time in seconds (CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID for
 * the CPU time of every thread). */
static inline double bench_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wall time in seconds. */
static inline double bench_now(void) { return bench_seconds(CLOCK_MONOTONIC); }

/* The threads an OpenMP parallel region runs (1 in a build without OpenMP). */
static inline int bench_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#endif
