/* row_segments.c — packed <-> padded rows and packed dropout, one device-dispatched call
 * per run of rows on stack views (see ops_row_segments.h). */
#include "ops_row_segments.h"

#include "ops_dropout.h"
#include "op_table.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A [rows, C] view of t from row `row` (t is [R, C] with any leading dims). */
static tr_tensor row_view(const tr_tensor *t, int64_t C, int64_t row, int64_t rows)
{
    tr_tensor v = *t;
    v.data = (char *)t->data + (size_t)(row * C) * tr_dtype_size(t->dtype);
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = C;
    v.numel = rows * C;
    return v;
}

/* C = the packed tensor's last dim; both tensors on one device, the padded one holding a
 * whole number of rows of C (any shape: [B, T, C], [B, T, H, D]). Row counts out. */
static int widths(tr_ctx *ctx, const char *op, const tr_tensor *packed, const tr_tensor *padded, int64_t *C,
                  int64_t *packed_rows, int64_t *padded_rows)
{
    if (!packed || !padded) return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: a tensor is NULL", op);
    char s1[160], s2[160];
    int64_t c = packed->ndim >= 1 ? packed->shape[packed->ndim - 1] : 0;
    if (c < 1 || padded->numel % c != 0 || packed->device != padded->device)
        return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                       "%s: the packed %s must be [rows, C] with C >= 1 and the padded %s a whole number of rows "
                       "of C, on the same device",
                       op, tr_op_describe(s1, sizeof s1, packed), tr_op_describe(s2, sizeof s2, padded));
    *C = c;
    *packed_rows = packed->numel / c;
    *padded_rows = padded->numel / c;
    return TR_OK;
}

/* Checks every segment against `packed_rows` and `padded_rows` (< 0: no bound), runs
 * ascending and disjoint in the padded layout. */
static int check_segments(tr_ctx *ctx, const char *op, const int64_t *segs, int64_t nseg, int64_t packed_rows,
                          int64_t padded_rows)
{
    if (nseg < 0 || (nseg > 0 && !segs))
        return tr_fail(tr_ctx_err(ctx), TR_EUSER, "%s: %lld segments with %s table", op, (long long)nseg,
                       segs ? "a" : "no");
    int64_t end = 0;
    for (int64_t s = 0; s < nseg; s++) {
        int64_t first = segs[3 * s], rows = segs[3 * s + 1], padded = segs[3 * s + 2];
        if (first < 0 || rows < 1 || first > packed_rows - rows || padded < end ||
            (padded_rows >= 0 && padded > padded_rows - rows)) {
            char bound[64] = "";
            if (padded_rows >= 0) snprintf(bound, sizeof bound, " and %lld padded", (long long)padded_rows);
            return tr_fail(tr_ctx_err(ctx), TR_EUSER,
                           "%s: segment %lld (packed rows %lld..%lld at padded row %lld) lies outside the %lld "
                           "packed%s rows, or before the previous segment's end (padded row %lld); make the "
                           "table with trainer.nn.packing",
                           op, (long long)s, (long long)first, (long long)(first + rows - 1), (long long)padded,
                           (long long)packed_rows, bound, (long long)end);
        }
        end = padded + rows;
    }
    return TR_OK;
}

/* Host tensors of one dtype: each run is a plain byte copy, the runs shared among threads
 * when there is enough to copy (the scatters and gathers around `trainer encode`'s attention
 * were one thread's memmove while the other waited). Below the bound no OpenMP region is
 * opened (even an if(0) one makes a libgomp team). */
enum { SEG_PARALLEL_BYTES = 1 << 20 };

static int host_bytes(const tr_tensor *a, const tr_tensor *b)
{
    return a->device == TR_CPU && b->device == TR_CPU && a->dtype == b->dtype;
}

/* Run s of a gather (scatter = 0: packed rows -> out, out packed) or of a scatter (padded
 * out; the zero rows between the previous run's end and this run's start are this run's to
 * clear, and the last run clears the tail up to padded_rows too). */
static void host_run(char *out, const char *x, size_t rb, const int64_t *segs, int64_t s, int64_t nseg, int scatter,
                     int64_t padded_rows)
{
    const int64_t *g = segs + 3 * s;   /* packed row, rows, padded row */
    if (!scatter) {
        memcpy(out + (size_t)g[0] * rb, x + (size_t)g[2] * rb, (size_t)g[1] * rb);
        return;
    }
    int64_t gap0 = s > 0 ? g[-1] + g[-2] : 0;   /* the previous run's padded end */
    if (g[2] > gap0) memset(out + (size_t)gap0 * rb, 0, (size_t)(g[2] - gap0) * rb);
    memcpy(out + (size_t)g[2] * rb, x + (size_t)g[0] * rb, (size_t)g[1] * rb);
    if (s == nseg - 1 && padded_rows > g[2] + g[1])
        memset(out + (size_t)(g[2] + g[1]) * rb, 0, (size_t)(padded_rows - g[2] - g[1]) * rb);
}

static void host_runs(char *out, const char *x, size_t rb, const int64_t *segs, int64_t nseg, int scatter,
                      int64_t padded_rows)
{
    if ((size_t)padded_rows * rb < SEG_PARALLEL_BYTES || nseg < 2) {
        for (int64_t s = 0; s < nseg; s++) host_run(out, x, rb, segs, s, nseg, scatter, padded_rows);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < nseg; s++) host_run(out, x, rb, segs, s, nseg, scatter, padded_rows);
}

/* The segments' rows through tensor copies (and, scattering, zeros in the gaps): the path
 * for tensors the host loop does not take. */
static int gather_views(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const int64_t *segs, int64_t nseg, int64_t C)
{
    int rc;
    for (int64_t s = 0; s < nseg; s++) {
        tr_tensor vo = row_view(out, C, segs[3 * s], segs[3 * s + 1]);
        tr_tensor vi = row_view(x, C, segs[3 * s + 2], segs[3 * s + 1]);
        if ((rc = tr_tensor_copy(ctx, &vo, &vi))) return rc;
    }
    return TR_OK;
}

static int scatter_views(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const int64_t *segs, int64_t nseg,
                         int64_t C, int64_t R)
{
    int rc;
    int64_t end = 0; /* padded rows [end, next segment) are a gap: zeros */
    for (int64_t s = 0; s <= nseg; s++) {
        int64_t padded = s < nseg ? segs[3 * s + 2] : R;
        if (padded > end) {
            tr_tensor gap = row_view(out, C, end, padded - end);
            if ((rc = tr_tensor_fill(ctx, &gap, 0.0))) return rc;
        }
        if (s == nseg) break;
        tr_tensor vo = row_view(out, C, padded, segs[3 * s + 1]);
        tr_tensor vi = row_view(x, C, segs[3 * s], segs[3 * s + 1]);
        if ((rc = tr_tensor_copy(ctx, &vo, &vi))) return rc;
        end = padded + segs[3 * s + 1];
    }
    return TR_OK;
}

/* gather (scatter = 0: out packed, x padded) or scatter (out padded, x packed). */
static int segments_run(tr_ctx *ctx, const char *op, tr_tensor *out, const tr_tensor *x, const int64_t *segs,
                        int64_t nseg, int scatter)
{
    int64_t C, N, R;
    int rc;
    if ((rc = widths(ctx, op, scatter ? x : out, scatter ? out : x, &C, &N, &R))) return rc;
    if ((rc = check_segments(ctx, op, segs, nseg, N, R))) return rc;
    if (host_bytes(out, x) && (!scatter || nseg > 0)) {
        host_runs(out->data, x->data, (size_t)C * tr_dtype_size(x->dtype), segs, nseg, scatter, R);
        return TR_OK;
    }
    return scatter ? scatter_views(ctx, out, x, segs, nseg, C, R) : gather_views(ctx, out, x, segs, nseg, C);
}

int tr_op_gather_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const int64_t *segs, int64_t nseg)
{
    return segments_run(ctx, "gather_segments", out, x, segs, nseg, 0);
}

int tr_op_scatter_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, const int64_t *segs, int64_t nseg)
{
    return segments_run(ctx, "scatter_segments", out, x, segs, nseg, 1);
}

static int dropout_runs(tr_ctx *ctx, const char *op, int backward, tr_tensor *out, const tr_tensor *in, float p,
                        const tr_rng_key *key, const int64_t *segs, int64_t nseg)
{
    int64_t C, N, No;
    int rc;
    if ((rc = widths(ctx, op, in, out, &C, &N, &No))) return rc;
    if ((rc = tr_op_want_numel(ctx, op, backward ? "dx" : "out", out, in->numel, "the input's number of elements")))
        return rc;
    if ((rc = check_segments(ctx, op, segs, nseg, N, -1))) return rc;
    for (int64_t s = 0; s < nseg; s++) {
        tr_tensor vo = row_view(out, C, segs[3 * s], segs[3 * s + 1]);
        tr_tensor vi = row_view(in, C, segs[3 * s], segs[3 * s + 1]);
        uint64_t off = (uint64_t)(segs[3 * s + 2] * C);
        rc = backward ? tr_op_dropout_backward(ctx, &vo, &vi, p, key, off) : tr_op_dropout(ctx, &vo, &vi, p, key, off);
        if (rc) return rc;
    }
    return TR_OK;
}

int tr_op_dropout_segments(tr_ctx *ctx, tr_tensor *out, const tr_tensor *x, float p, const tr_rng_key *key,
                           const int64_t *segs, int64_t nseg)
{
    return dropout_runs(ctx, "dropout_segments", 0, out, x, p, key, segs, nseg);
}

int tr_op_dropout_segments_backward(tr_ctx *ctx, tr_tensor *dx, const tr_tensor *dout, float p, const tr_rng_key *key,
                                    const int64_t *segs, int64_t nseg)
{
    return dropout_runs(ctx, "dropout_segments_backward", 1, dx, dout, p, key, segs, nseg);
}
