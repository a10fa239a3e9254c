/* check.h — the C test harness. A test program is a list of cases run by RUN(fn); each
 * CHECK that fails marks its case failed and prints where and why. Every case prints
 * one line, "PASS name" or "FAIL name: file:line: message", which tests/run.sh counts;
 * check_done() returns the exit status (non-zero when anything failed).
 *
 *   static void test_rounding(void) { CHECK(x == 512, "got %zu", x); }
 *   int main(void) { RUN(test_rounding); return check_done(); }
 *
 * A program can also list its cases in a table, { CASE(test_rounding), ... }, and run them
 * in order with check_run_all (the same lines as RUN).
 */
#ifndef TR_CHECK_H
#define TR_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int check_case_failed;      /* failures in the running case */
static int check_cases_failed;     /* failed cases in this program */
static const char *check_case_name = "?";

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            if (!check_case_failed) {                                                        \
                printf("FAIL %s: %s:%d: %s: ", check_case_name, __FILE__, __LINE__, #cond);  \
                printf(__VA_ARGS__);                                                         \
                printf("\n");                                                                \
                fflush(stdout);                                                              \
            }                                                                                \
            check_case_failed++;                                                             \
        }                                                                                    \
    } while (0)

/* xorshift64: the seeded pseudo-random numbers of randomized cases. */
static inline uint64_t check_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, atol, rtol)                                                        \
    CHECK(fabs((double)(a) - (double)(b)) <= (atol) + (rtol) * fabs((double)(b)),            \
          "%.9g vs %.9g", (double)(a), (double)(b))

/* Runs one case: its failures mark it failed; a case without one prints its PASS line. */
static inline void check_run(const char *name, void (*fn)(void))
{
    check_case_name = name;
    check_case_failed = 0;
    fn();
    if (check_case_failed) check_cases_failed++;
    else printf("PASS %s\n", name);
    fflush(stdout);
}

#define RUN(fn) check_run(#fn, fn)

/* A case of a table: the function and its name. */
typedef struct {
    const char *name;
    void (*fn)(void);
} check_case;

#define CASE(fn) { #fn, fn }

static inline void check_run_all(const check_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) check_run(cases[i].name, cases[i].fn);
}

static inline int check_done(void) { return check_cases_failed ? 1 : 0; }

#endif
