/* opselem_check.h — helpers shared by the opselem op tests (elementwise, embedding,
 * dropout, loss, pooling, similarity, reduce, optim): a seeded generator, central finite
 * differences in float64, f32-vs-f64 comparison, and guarded buffers that detect writes
 * outside an output. Include after check.h. Everything is static: each test program
 * gets its own copy. */
#ifndef TR_OPSELEM_CHECK_H
#define TR_OPSELEM_CHECK_H

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ random numbers */

/* Uniform in [-1, 1) from a 64-bit LCG; deterministic per seed. */
static inline double urand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}

static inline void rand_fill(double *x, int64_t n, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++) x[i] = urand(s);
}

static inline void to_f32(float *dst, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* ------------------------------------------------------------ guarded buffers */

/* A buffer of `bytes` with 64 guard bytes (0xA5) on each side; guard_intact says whether
 * anything wrote into the guards. */
enum { GUARD = 64 };

static inline void *guard_alloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + 2 * GUARD + sizeof(size_t));
    if (!p) return NULL;
    memcpy(p, &bytes, sizeof bytes);
    memset(p + sizeof(size_t), 0xA5, GUARD);
    memset(p + sizeof(size_t) + GUARD, 0, bytes);
    memset(p + sizeof(size_t) + GUARD + bytes, 0xA5, GUARD);
    return p + sizeof(size_t) + GUARD;
}

static inline int guard_intact(const void *q)
{
    const unsigned char *p = (const unsigned char *)q - GUARD - sizeof(size_t);
    size_t bytes;
    memcpy(&bytes, p, sizeof bytes);
    for (int i = 0; i < GUARD; i++)
        if (p[sizeof(size_t) + i] != 0xA5 || p[sizeof(size_t) + GUARD + bytes + i] != 0xA5) return 0;
    return 1;
}

static inline void guard_free(void *q)
{
    if (q) free((unsigned char *)q - GUARD - sizeof(size_t));
}

/* ------------------------------------------------------------ finite differences */

typedef double (*fd_loss_fn)(void *user);

/* For every i, compares analytic[i] with the central difference (h = 1e-6) of f with
 * respect to x[i]; relative error must stay below 1e-6 (1e-8 absolute near zero).
 * Reports the first mismatch only. */
static inline void fd_check(const char *what, double *x, int64_t n, const double *analytic, fd_loss_fn f, void *user)
{
    const double h = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + h;
        double lp = f(user);
        x[i] = save - h;
        double lm = f(user);
        x[i] = save;
        double num = (lp - lm) / (2 * h);
        double err = fabs(num - analytic[i]);
        CHECK(err <= 1e-6 * fabs(num) + 1e-8, "%s[%lld]: analytic %.12g, finite difference %.12g", what,
              (long long)i, analytic[i], num);
        if (err > 1e-6 * fabs(num) + 1e-8) return;
    }
}

/* a (f32 kernel) against ref (f64 kernel): |a - ref| <= atol + rtol |ref| for all i. */
static inline void close_f32(const char *what, const float *a, const double *ref, int64_t n, double rtol, double atol)
{
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)a[i] - ref[i]);
        CHECK(err <= atol + rtol * fabs(ref[i]), "%s[%lld]: %.9g vs reference %.12g", what, (long long)i,
              (double)a[i], ref[i]);
        if (err > atol + rtol * fabs(ref[i])) return;
    }
}

static inline double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif
