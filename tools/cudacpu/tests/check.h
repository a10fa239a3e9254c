/* check.h (cudacpu tests) — what every test program shares: a case table run by name
 * (`prog CASE`, the environment set by run.sh), checks that end the program with a reason
 * on stdout and exit status 1, and helpers to launch and read back.
 * A program prints nothing when its case behaves as expected and exits 0; run.sh turns that
 * into PASS/FAIL lines. */
#ifndef CUDACPU_TEST_CHECK_H
#define CUDACPU_TEST_CHECK_H

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            printf("why: %s:%d: %s: ", __FILE__, __LINE__, #cond);                                           \
            printf(__VA_ARGS__);                                                                             \
            printf("\n");                                                                                    \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

#define CUDA_OK(call)                                                                                        \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        CHECK(e_ == cudaSuccess, "%s returned %s", #call, cudaGetErrorName(e_));                            \
    } while (0)

/* Non-blocking streams made into each of out, in the order given (CUDA_OK). */
inline void new_streams(std::initializer_list<cudaStream_t *> out)
{
    for (cudaStream_t *s : out) CUDA_OK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
}

/* A case's clean-up, in the order given: cudaFree, cudaStreamDestroy or cudaEventDestroy of
 * each (CUDA_OK: a failure ends the program). */
inline void free_device(std::initializer_list<void *> ptrs)
{
    for (void *p : ptrs) CUDA_OK(cudaFree(p));
}
inline void destroy_streams(std::initializer_list<cudaStream_t> streams)
{
    for (cudaStream_t s : streams) CUDA_OK(cudaStreamDestroy(s));
}
inline void destroy_events(std::initializer_list<cudaEvent_t> events)
{
    for (cudaEvent_t e : events) CUDA_OK(cudaEventDestroy(e));
}

/* the schedule order or stream mode this run was started with ("" when unset) */
inline const char *env_or(const char *name, const char *def)
{
    const char *s = getenv(name);
    return s && *s ? s : def;
}
inline bool env_is(const char *name, const char *def, const char *value) { return !strcmp(env_or(name, def), value); }

/* The last launch failed with a message containing every one of the given texts. */
inline void expect_failure(cudaError_t got, const char *const *texts, int ntexts)
{
    CHECK(got == cudaErrorLaunchFailure, "expected cudaErrorLaunchFailure, got %s", cudaGetErrorName(got));
    const char *msg = cudacpu_last_failure();
    for (int i = 0; i < ntexts; i++) CHECK(strstr(msg, texts[i]), "message lacks \"%s\": %s", texts[i], msg);
}

/* "file.cu:line", for matching a message's source line */
inline const char *at_line(const char *file, int line)
{
    static char b[8][128];
    static int k;
    char *s = b[k++ % 8];
    const char *base = strrchr(file, '/');
    snprintf(s, 128, "%s:%d", base ? base + 1 : file, line);
    return s;
}

struct test_case {
    const char *name;
    void (*run)();
};

inline int run_case(const test_case *cases, int n, int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(cases[i].name, argv[1])) {
            cases[i].run();
            return 0;
        }
    printf("why: no case %s\n", argv[1]);
    return 2;
}

#endif
