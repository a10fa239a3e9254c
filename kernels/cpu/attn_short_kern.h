/* attn_short_kern.h — the short-sequence head kernel of attn_short.c over one vector ISA,
 * included once per ISA (as attn_tile_kern.h is). Expects:
 *   SK_INLINE          `static inline` with always_inline and the ISA's target attribute
 *   SK_NAME(n)         n with the ISA's suffix
 *   SK_V, SK_VW        the float vector type and its width in floats; SK_ALIGN its bytes
 *   SK_K               a lane mask (a mask register or a vector of all-ones lanes)
 *   SK_ZERO(), SK_SET1(x), SK_LOAD(p), SK_LOADU(p), SK_STORE(p, v), SK_STOREU(p, v),
 *   SK_BCAST(p), SK_ADD, SK_SUB, SK_MUL, SK_DIV, SK_MAX, SK_FMA(a, b, c) (a b + c),
 *   SK_FNMA(a, b, c) (c - a b)
 *   SK_GE(a, b), SK_GT(a, b)       lane masks of a >= b, a > b
 *   SK_BLEND(k, a, b)              b where k, else a
 *   SK_ZERO_UNLESS(k, v)           v where k, else +0
 *   SK_POW2(n)                     2^n for integral floats n (the exponent bits)
 *   SK_MANT_EXP(x, m, e)           x = 2^e m, m in [1, 2)
 *   SK_HALVE_IF(k, m), SK_INC_IF(k, e)   m / 2 and e + 1 where k, else m and e
 *   SK_STORE_FIRST(p, n, v)        v's first min(n, SK_VW) lanes to p (n >= 1)
 *   SK_PACK_QT(qt, Tp, q, ld, T, D)      q^T [D, Tp], padding queries 0
 *   SK_PROWS(DV), SK_PROWS_MAX, SK_DV_MAX  query rows per block of P v (with DV vectors
 *                                  of D each) within the register file, and the largest
 *   SK_ROWS_UNROLL                 the unroll pragma of P v's loops over a block's rows, or
 *                                  nothing (the compiler's choice)
 *
 * The kernel macros differ only where the ISAs do (masks, exponent bits, the registers); the
 * softmax, its exp and log polynomials and the two products are written once. */

/* e^x: fast_math.h's tr_fast_expf (Cody-Waite reduction, Cephes degree-6 polynomial, about
 * 1 ulp), with x < -87 (including -inf: masked keys) giving exactly 0. */
SK_INLINE SK_V SK_NAME(exp)(SK_V x)
{
    const float c[6] = TR_EXP_POLY;
    const SK_V lo = SK_SET1(TR_EXP_LO), magic = SK_SET1(TR_EXP_MAGIC);
    SK_K keep = SK_GE(x, lo);
    SK_V xc = SK_BLEND(keep, lo, x);
    SK_V nf = SK_SUB(SK_FMA(xc, SK_SET1(TR_EXP_LOG2E), magic), magic);
    SK_V r = SK_FNMA(nf, SK_SET1(TR_EXP_LN2_HI), xc);
    r = SK_FNMA(nf, SK_SET1(TR_EXP_LN2_LO), r);
    SK_V p = SK_SET1(c[0]);
    for (int i = 1; i < 6; i++) p = SK_FMA(p, r, SK_SET1(c[i]));
    SK_V e = SK_FMA(SK_MUL(p, r), r, SK_ADD(r, SK_SET1(1.0f)));
    return SK_ZERO_UNLESS(keep, SK_MUL(e, SK_POW2(nf)));
}

/* ln x for x >= 1 (row sums): Cephes' logf, x = 2^e m with m in [sqrt(1/2), sqrt(2)),
 * ln m = f - f^2/2 + f^3 P(f), f = m - 1, and e ln2 in two parts (about 1 ulp). */
SK_INLINE SK_V SK_NAME(log)(SK_V x)
{
    SK_V m, e;
    SK_MANT_EXP(x, m, e);
    SK_K big = SK_GT(m, SK_SET1(1.41421356237f));
    m = SK_HALVE_IF(big, m);
    e = SK_INC_IF(big, e);
    SK_V f = SK_SUB(m, SK_SET1(1.0f)), z = SK_MUL(f, f);
    SK_V p = SK_SET1(log_poly[0]);
    for (int i = 1; i < 9; i++) p = SK_FMA(p, f, SK_SET1(log_poly[i]));
    SK_V y = SK_MUL(SK_MUL(p, f), z);
    y = SK_FMA(e, SK_SET1(TR_EXP_LN2_LO), y);
    y = SK_FNMA(z, SK_SET1(0.5f), y);
    return SK_FMA(e, SK_SET1(TR_EXP_LN2_HI), SK_ADD(f, y));
}

/* One head: q, k, v point at its row 0 (rows ld apart), out likewise, lse at its T values.
 * NG = groups of SK_VW query rows (T <= SK_VW * NG), DV = vectors of D. keep bit j = key j
 * kept.
 *
 * The scores are computed transposed, S^T[j, i], SK_VW queries to a vector: the softmax over
 * keys is then an elementwise max, exp and sum over the kept keys' vectors (no horizontal
 * reductions, no per-row calls), a masked key is simply left out, and the score products
 * run one accumulator chain per key, KEYS at a time. */
SK_INLINE void SK_NAME(head)(const int NG, const int DV, float *out, float *lse, const float *q, const float *k,
                             const float *v, uint32_t keep, float scale, int64_t T, int64_t ld)
{
    enum { MAXP = 32, KEYS = 8 };
    const int Tp = SK_VW * NG, D = SK_VW * DV, PROWS = SK_PROWS(DV);
    float qt[64 * MAXP] __attribute__((aligned(SK_ALIGN)));   /* q^T [D, Tp], padding queries 0 */
    float PT[MAXP * MAXP] __attribute__((aligned(SK_ALIGN))); /* exp(s - max), [kept key][Tp] */
    float inv[MAXP] __attribute__((aligned(SK_ALIGN)));       /* 1 / row sum, per query */
    int idx[MAXP];                                            /* the kept keys */
    int nk = 0;
    for (int j = 0; j < T; j++)
        if (keep >> j & 1u) idx[nk++] = j;
    if (nk == 0) { /* every key masked: out 0, lse -inf */
        for (int64_t i = 0; i < T; i++) {
            lse[i] = -INFINITY;
            for (int c = 0; c < DV; c++) SK_STOREU(out + i * ld + SK_VW * c, SK_ZERO());
        }
        return;
    }
    SK_PACK_QT(qt, Tp, q, ld, T, D);
    const SK_V vscale = SK_SET1(scale);

    for (int g = 0; g < NG; g++) {
        /* S^T of the kept keys for queries SK_VW g .. SK_VW g + SK_VW-1 (a short last run
         * repeats a key) */
        for (int u0 = 0; u0 < nk; u0 += KEYS) {
            const float *kr[KEYS];
            for (int u = 0; u < KEYS; u++) kr[u] = k + (int64_t)idx[u0 + u < nk ? u0 + u : nk - 1] * ld;
            SK_V acc[KEYS];
            _Pragma("GCC unroll 8") for (int u = 0; u < KEYS; u++) acc[u] = SK_ZERO();
            for (int d = 0; d < D; d++) {
                SK_V qv = SK_LOAD(qt + d * Tp + SK_VW * g);
                _Pragma("GCC unroll 8") for (int u = 0; u < KEYS; u++) acc[u] = SK_FMA(SK_BCAST(kr[u] + d), qv, acc[u]);
            }
            for (int u = 0; u < KEYS && u0 + u < nk; u++)
                SK_STORE(PT + (u0 + u) * Tp + SK_VW * g, SK_MUL(acc[u], vscale));
        }
        SK_V mx = SK_LOAD(PT + SK_VW * g);
        for (int u = 1; u < nk; u++) mx = SK_MAX(mx, SK_LOAD(PT + u * Tp + SK_VW * g));
        SK_V sum = SK_ZERO();
        for (int u = 0; u < nk; u++) {
            SK_V p = SK_NAME(exp)(SK_SUB(SK_LOAD(PT + u * Tp + SK_VW * g), mx));
            SK_STORE(PT + u * Tp + SK_VW * g, p);
            sum = SK_ADD(sum, p);
        }
        /* sum >= 1 (the maximum gives exp(0)) */
        SK_STORE(inv + SK_VW * g, SK_DIV(SK_SET1(1.0f), sum));
        SK_STORE_FIRST(lse + SK_VW * g, T - SK_VW * g, SK_ADD(mx, SK_NAME(log)(sum)));
    }

    /* out = diag(1 / row sum) (P v), PROWS rows at a time (a short last block repeats row T-1) */
    for (int64_t i = 0; i < T; i += PROWS) {
        int64_t ir[SK_PROWS_MAX];
        for (int r = 0; r < PROWS; r++) ir[r] = i + r < T ? i + r : T - 1;
        SK_V acc[SK_PROWS_MAX][SK_DV_MAX];
        SK_ROWS_UNROLL for (int r = 0; r < PROWS; r++)
            _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++) acc[r][c] = SK_ZERO();
        for (int u = 0; u < nk; u++) {
            const float *vr = v + (int64_t)idx[u] * ld, *Pu = PT + u * Tp;
            SK_V vv[SK_DV_MAX];
            _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++) vv[c] = SK_LOADU(vr + SK_VW * c);
            SK_ROWS_UNROLL for (int r = 0; r < PROWS; r++) {
                SK_V b = SK_BCAST(Pu + ir[r]);
                _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++) acc[r][c] = SK_FMA(b, vv[c], acc[r][c]);
            }
        }
        for (int r = 0; r < PROWS && i + r < T; r++) {
            SK_V sc = SK_SET1(inv[i + r]);
            _Pragma("GCC unroll 8") for (int c = 0; c < DV; c++)
                SK_STOREU(out + (i + r) * ld + SK_VW * c, SK_MUL(acc[r][c], sc));
        }
    }
}

/* the next inclusion defines its own */
#undef SK_INLINE
#undef SK_NAME
#undef SK_V
#undef SK_VW
#undef SK_ALIGN
#undef SK_K
#undef SK_ZERO
#undef SK_SET1
#undef SK_LOAD
#undef SK_LOADU
#undef SK_STORE
#undef SK_STOREU
#undef SK_BCAST
#undef SK_ADD
#undef SK_SUB
#undef SK_MUL
#undef SK_DIV
#undef SK_MAX
#undef SK_FMA
#undef SK_FNMA
#undef SK_GE
#undef SK_GT
#undef SK_BLEND
#undef SK_ZERO_UNLESS
#undef SK_POW2
#undef SK_MANT_EXP
#undef SK_HALVE_IF
#undef SK_INC_IF
#undef SK_STORE_FIRST
#undef SK_PACK_QT
#undef SK_PROWS
#undef SK_PROWS_MAX
#undef SK_DV_MAX
#undef SK_ROWS_UNROLL
