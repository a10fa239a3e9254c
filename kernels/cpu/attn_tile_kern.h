/* attn_tile_kern.h — the micro-kernels and the driver of attn_tile.c over one vector ISA,
 * included once per ISA. Expects:
 *   TK_ATTR            the target attribute of every function here
 *   TK_NAME(n)         n with the ISA's suffix
 *   TK_V, TK_VW        the float vector type and its width in floats
 *   TK_M, TK_MASK(n)   a mask type and the mask of the first n lanes (1 <= n <= TK_VW)
 *   TK_ZERO(), TK_LOAD(p), TK_LOADM(p, m), TK_BCAST(p), TK_SET1(x), TK_FMA(a, b, c),
 *   TK_MUL(a, b), TK_ADD(a, b), TK_STORE(p, v), TK_STOREM(p, m, v)
 *   TK_NVMAX           the most vectors of a tile row; TK_MR(nv) the tile's rows for nv
 *
 * A tile is MR rows x NV vectors of C held in registers over the whole K loop: per k, NV
 * loads of B's row k and MR broadcasts of A's column k feed MR x NV FMAs. MR and NV are
 * constants of each instantiation (TK_KERNEL), so the accumulator array is unrolled into
 * registers. The last vector of a row is a masked load/store where the panel's width is not
 * a whole number of vectors (any N is correct), and a plain one where it is (FULL_, the
 * attention's usual case: Tp and D are multiples of 8): AVX2's masked store (vmaskmovps) is
 * microcode on AMD's Zen 2 and 3, 42 ops holding the store pipe 12 cycles (LLVM's Znver3
 * model, from llvm-exegesis), so six of them cost a K = 32 score tile about a third of its
 * FMA time. Masked and plain give the same bits. The kernel macros are the same text on
 * every inclusion (an identical redefinition is allowed); the typedef and the driver are
 * defined once per ISA. */

/* ------------------------------------------------------------ the micro-kernel */

/* The last vector of a row: whole (FULL_ 1) or the lanes of tail. */
#define TK_LOAD_LAST(FULL_, p, tail) ((FULL_) ? TK_LOAD(p) : TK_LOADM((p), (tail)))
#define TK_STORE_LAST(FULL_, p, tail, v)  \
    do {                                  \
        if (FULL_) TK_STORE((p), (v));    \
        else TK_STOREM((p), (tail), (v)); \
    } while (0)

/* C[r][:] (=, or += when acc_c) ar[r] * sum_k A(r, k) B[k][:] for r < MR_, NV_ vectors wide,
 * the last one masked by tail unless FULL_. A points at the tile's first row (TR_ 0) or
 * column (TR_ 1). */
#define TK_KERNEL(NV_, MR_, TR_, FULL_)                                                            \
    TK_ATTR static void TK_NAME(k##NV_##x##MR_##t##TR_##f##FULL_)(float *C, int64_t ldc,           \
                                                                  const float *A,                  \
                                                          int64_t lda, const float *B, int64_t ldb, \
                                                          int64_t K, TK_M tail, const float *ar,    \
                                                          int acc_c)                                \
    {                                                                                              \
        TK_V acc[MR_][NV_];                                                                        \
        _Pragma("GCC unroll 16") for (int r = 0; r < MR_; r++)                                     \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV_; v++) acc[r][v] = TK_ZERO();           \
        for (int64_t k = 0; k < K; k++) {                                                          \
            const float *bk = B + k * ldb;                                                         \
            TK_V b[NV_];                                                                           \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV_ - 1; v++) b[v] = TK_LOAD(bk + v * TK_VW); \
            b[NV_ - 1] = TK_LOAD_LAST(FULL_, bk + (NV_ - 1) * TK_VW, tail);                        \
            _Pragma("GCC unroll 16") for (int r = 0; r < MR_; r++) {                               \
                TK_V x = TK_BCAST((TR_) ? A + k * lda + r : A + r * lda + k);                      \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV_; v++)                              \
                    acc[r][v] = TK_FMA(x, b[v], acc[r][v]);                                        \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 16") for (int r = 0; r < MR_; r++) {                                   \
            TK_V s = TK_SET1(ar[r]);                                                               \
            float *c = C + r * ldc;                                                                \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV_ - 1; v++) {                            \
                TK_V o = TK_MUL(acc[r][v], s);                                                     \
                if (acc_c) o = TK_ADD(o, TK_LOAD(c + v * TK_VW));                                  \
                TK_STORE(c + v * TK_VW, o);                                                        \
            }                                                                                      \
            TK_V o = TK_MUL(acc[r][NV_ - 1], s);                                                   \
            if (acc_c) o = TK_ADD(o, TK_LOAD_LAST(FULL_, c + (NV_ - 1) * TK_VW, tail));            \
            TK_STORE_LAST(FULL_, c + (NV_ - 1) * TK_VW, tail, o);                                  \
        }                                                                                          \
    }

/* Every row count 1..8 of a width, for both A forms and both last vectors (a remainder tile of
 * mr rows runs its own instantiation: no wasted FMAs and no reads past A's last row). */
#define TK_KERNELS_MR(NV_, TR_, F_)                                                                \
    TK_KERNEL(NV_, 1, TR_, F_) TK_KERNEL(NV_, 2, TR_, F_) TK_KERNEL(NV_, 3, TR_, F_)               \
    TK_KERNEL(NV_, 4, TR_, F_) TK_KERNEL(NV_, 5, TR_, F_) TK_KERNEL(NV_, 6, TR_, F_)               \
    TK_KERNEL(NV_, 7, TR_, F_) TK_KERNEL(NV_, 8, TR_, F_)
#define TK_KERNELS(NV_)                                                                            \
    TK_KERNELS_MR(NV_, 0, 0) TK_KERNELS_MR(NV_, 1, 0) TK_KERNELS_MR(NV_, 0, 1) TK_KERNELS_MR(NV_, 1, 1)

typedef void (*TK_NAME(kern_fn))(float *, int64_t, const float *, int64_t, const float *, int64_t,
                                 int64_t, TK_M, const float *, int);

#define TK_ROW(NV_, TR_, F_)                                                                       \
    { TK_NAME(k##NV_##x1t##TR_##f##F_), TK_NAME(k##NV_##x2t##TR_##f##F_),                          \
      TK_NAME(k##NV_##x3t##TR_##f##F_), TK_NAME(k##NV_##x4t##TR_##f##F_),                          \
      TK_NAME(k##NV_##x5t##TR_##f##F_), TK_NAME(k##NV_##x6t##TR_##f##F_),                          \
      TK_NAME(k##NV_##x7t##TR_##f##F_), TK_NAME(k##NV_##x8t##TR_##f##F_) }

/* ------------------------------------------------------------ the driver */

/* The column panel whose first column leaves rem columns of the row: its vectors (*nv, at most
 * TK_NVMAX) and the lanes of its last one (*tail); returns 1 when that vector is whole (the
 * plain-store kernels), which every panel's is but the last one of a row of N not a multiple
 * of TK_VW. */
TK_ATTR static inline int TK_NAME(panel)(int64_t rem, int *nv, TK_M *tail)
{
    *nv = rem >= TK_NVMAX * TK_VW ? TK_NVMAX : (int)((rem + TK_VW - 1) / TK_VW);
    int64_t last = rem - (int64_t)(*nv - 1) * TK_VW;   /* the columns from the last vector on */
    *tail = TK_MASK(last < TK_VW ? (int)last : TK_VW);
    return last >= TK_VW;
}

/* How many of a row's panels run the masked-store kernels (tr_attn_tile_masked_panels). */
TK_ATTR static int TK_NAME(masked_panels)(int64_t N)
{
    int n = 0, nv;
    TK_M tail;
    for (int64_t n0 = 0; n0 < N; n0 += (int64_t)nv * TK_VW) n += !TK_NAME(panel)(N - n0, &nv, &tail);
    return n;
}

/* Column panels of up to TK_NVMAX vectors (outer, so that a panel of B stays in L1 across
 * the row tiles), row tiles of TK_MR(nv) rows (inner). tables[full][nv - 1][mr - 1]: the
 * kernels of the A form trans_a, full = 1 for a panel whose last vector is whole. */
TK_ATTR static void TK_NAME(gemm)(TK_NAME(kern_fn) const (*tables)[TK_NVMAX][8], int trans_a, float *C,
                                  int64_t ldc, const float *A, int64_t lda, const float *B,
                                  int64_t ldb, int64_t M, int64_t N, int64_t K, float alpha,
                                  const float *rs, int accumulate)
{
    for (int64_t n0 = 0; n0 < N;) {
        int nv;
        TK_M tail;
        TK_NAME(kern_fn) const *table = tables[TK_NAME(panel)(N - n0, &nv, &tail)][nv - 1];
        int mrmax = TK_MR(nv);
        for (int64_t m0 = 0; m0 < M; m0 += mrmax) {
            int mr = M - m0 < mrmax ? (int)(M - m0) : mrmax;
            float ar[8];
            for (int r = 0; r < mr; r++) ar[r] = rs ? alpha * rs[m0 + r] : alpha;
            const float *Am = trans_a ? A + m0 : A + m0 * lda;
            table[mr - 1](C + m0 * ldc + n0, ldc, Am, lda, B + n0, ldb, K, tail, ar, accumulate);
        }
        n0 += (int64_t)nv * TK_VW;
    }
}
