/* nn_testutil.h — helpers shared by the op tests (test_matmul.c, test_layernorm.c, ...):
 * deterministic random fills, relative errors, central finite differences and guarded
 * buffers that detect writes outside an output. Header-only; each test includes it once. */
#ifndef TR_NN_TESTUTIL_H
#define TR_NN_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ random */

static uint64_t tu_state = 0x9e3779b97f4a7c15ull;

static inline void tu_seed(uint64_t s) { tu_state = s * 0x9e3779b97f4a7c15ull + 1; }

/* splitmix64 -> uniform in [-1, 1) */
static inline double tu_rand(void)
{
    uint64_t z = (tu_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline void tu_fill(double *x, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) x[i] = tu_rand() * scale;
}

static inline void tu_to_f32(float *dst, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* ------------------------------------------------------------ errors */

/* max |a - b| / max(max |b|, floor): relative to the reference's scale */
static inline double tu_rel_err(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / den;
}

static inline double tu_rel_err_f32(const float *a, const double *b, int64_t n)
{
    double num = 0, den = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / den;
}

static inline int tu_all_finite(const double *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

/* ------------------------------------------------------------ finite differences */

/* grad[i] = (f(x + h e_i) - f(x - h e_i)) / 2h, perturbing x in place (restored). */
static inline void tu_fd_grad(double *grad, double *x, int64_t n, double (*f)(void *), void *ctx)
{
    const double h = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double fp = f(ctx);
        x[i] = keep - h;
        double fm = f(ctx);
        x[i] = keep;
        grad[i] = (fp - fm) / (2 * h);
    }
}

static inline double tu_dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------ guarded buffers */

enum { TU_GUARD = 64 };
static const unsigned char tu_sentinel = 0xA5;

/* A buffer of nbytes with TU_GUARD sentinel bytes on each side; returns the inner pointer. */
static inline void *tu_guarded(size_t nbytes)
{
    unsigned char *p = malloc(nbytes + 2 * TU_GUARD);
    if (!p) abort();
    memset(p, tu_sentinel, nbytes + 2 * TU_GUARD);
    return p + TU_GUARD;
}

/* 1 when both guards are intact. */
static inline int tu_guard_ok(const void *inner, size_t nbytes)
{
    const unsigned char *p = (const unsigned char *)inner - TU_GUARD;
    for (size_t i = 0; i < TU_GUARD; i++)
        if (p[i] != tu_sentinel || p[TU_GUARD + nbytes + i] != tu_sentinel) return 0;
    return 1;
}

static inline void tu_guarded_free(void *inner)
{
    if (inner) free((unsigned char *)inner - TU_GUARD);
}

#endif
