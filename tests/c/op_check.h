/* op_check.h — what the C op tests share (one helper for all of them): a seeded random
 * generator, float64 central finite differences, normalised errors and guarded buffers
 * that detect writes outside an output. Header-only and static: each test program gets
 * its own copy. Include after check.h (fd_check and close_f32 report through CHECK). */
#ifndef TR_OP_CHECK_H
#define TR_OP_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ random numbers */

static uint64_t oc_state = 0x9e3779b97f4a7c15ull;

static inline void oc_seed(uint64_t s) { oc_state = s * 0x9e3779b97f4a7c15ull + 1; }

/* splitmix64 -> uniform in [-1, 1) */
static inline double oc_rand(void)
{
    uint64_t z = (oc_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline void oc_fill(double *x, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) x[i] = oc_rand() * scale;
}

static inline void oc_to_f32(float *dst, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static inline double oc_dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------ errors */

static inline int oc_all_finite(const double *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

/* max |a - b| / max(max |b|, floor): the error relative to the reference's scale; NaN in
 * a gives infinity, and so does an infinity in one but not the other (equal ones count 0). */
static inline double oc_norm_err(const double *a, const double *b, int64_t n, double floor)
{
    double num = 0, den = floor;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] == b[i] && isinf(b[i])) continue;   /* the same infinity (an lse of no keys): no error */
        double d = fabs(a[i] - b[i]);
        if (d != d) return INFINITY;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / den;
}

static inline double oc_rel_err(const double *a, const double *b, int64_t n) { return oc_norm_err(a, b, n, 1e-30); }

static inline double oc_rel_err_f32(const float *a, const double *b, int64_t n)
{
    double num = 0, den = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / den;
}

/* Normalised mean-square error sum (a - b)^2 / sum b^2 (ggml's test-backend-ops). */
static inline double oc_nmse(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* a (f32) against ref (f64): |a - ref| <= atol + rtol |ref| for all i; reports the first
 * mismatch only. */
static inline void close_f32(const char *what, const float *a, const double *ref, int64_t n, double rtol, double atol)
{
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)a[i] - ref[i]);
        CHECK(err <= atol + rtol * fabs(ref[i]), "%s[%lld]: %.9g vs reference %.12g", what, (long long)i,
              (double)a[i], ref[i]);
        if (err > atol + rtol * fabs(ref[i])) return;
    }
}

/* ------------------------------------------------------------ finite differences */

typedef double (*oc_loss_fn)(void *user);

/* grad[i] = (f(x + h e_i) - f(x - h e_i)) / 2h, perturbing x in place (restored). */
static inline void oc_fd_grad(double *grad, double *x, int64_t n, oc_loss_fn f, void *user)
{
    const double h = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double fp = f(user);
        x[i] = keep - h;
        double fm = f(user);
        x[i] = keep;
        grad[i] = (fp - fm) / (2 * h);
    }
}

/* analytic against oc_fd_grad of f: relative error below 1e-6 (1e-8 absolute near 0). */
static inline void fd_check(const char *what, double *x, int64_t n, const double *analytic, oc_loss_fn f, void *user)
{
    double *num = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!num) abort();
    oc_fd_grad(num, x, n, f, user);
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(num[i] - analytic[i]);
        CHECK(err <= 1e-6 * fabs(num[i]) + 1e-8, "%s[%lld]: analytic %.12g, finite difference %.12g", what,
              (long long)i, analytic[i], num[i]);
        if (err > 1e-6 * fabs(num[i]) + 1e-8) break;
    }
    free(num);
}

/* ------------------------------------------------------------ guarded buffers */

/* A buffer of nbytes (zeroed) with OC_GUARD sentinel bytes on each side; returns the
 * inner pointer. oc_guard_ok says whether both guards are intact. */
enum { OC_GUARD = 64 };
static const unsigned char oc_sentinel = 0xA5;

static inline void *oc_guarded(size_t nbytes)
{
    unsigned char *p = malloc(nbytes + 2 * OC_GUARD + sizeof(size_t));
    if (!p) abort();
    memcpy(p, &nbytes, sizeof nbytes);
    p += sizeof(size_t);
    memset(p, oc_sentinel, OC_GUARD);
    memset(p + OC_GUARD, 0, nbytes);
    memset(p + OC_GUARD + nbytes, oc_sentinel, OC_GUARD);
    return p + OC_GUARD;
}

static inline int oc_guard_ok(const void *inner)
{
    const unsigned char *p = (const unsigned char *)inner - OC_GUARD;
    size_t nbytes;
    memcpy(&nbytes, p - sizeof(size_t), sizeof nbytes);
    for (size_t i = 0; i < OC_GUARD; i++)
        if (p[i] != oc_sentinel || p[OC_GUARD + nbytes + i] != oc_sentinel) return 0;
    return 1;
}

static inline void oc_guarded_free(void *inner)
{
    if (inner) free((unsigned char *)inner - OC_GUARD - sizeof(size_t));
}

#endif
