/* attention_impl.h — the body of attention.c over REAL, instantiated for float and double.
 * Expects REAL, KFN(name), GEMM (cblas_sgemm or cblas_dgemm), KEXP (exp for the type) and KCAP
 * (min(x, cap), branch-free for float). Leading dimension of every
 * q/k/v/out row is H*D: row t of head h in batch b starts at ((b*T + t)*H + h)*D. */

/* ------------------------------------------------------------ shared row steps */

/* row[j] = fill where key j of batch row b is padded (mask 0), else unchanged: one typed
 * select loop per mask dtype, so that it vectorises. */
TR_SIMD_CLONES static void KFN(mask_fill)(REAL *row, REAL fill, const void *mask, int mask_dtype, int64_t b,
                                          int64_t T)
{
    if (mask_dtype == TR_F32) {
        const float *m = (const float *)mask + b * T;
#pragma omp simd
        for (int64_t j = 0; j < T; j++) row[j] = m[j] != 0 ? row[j] : fill;
    } else {
        const int32_t *m = (const int32_t *)mask + b * T;
#pragma omp simd
        for (int64_t j = 0; j < T; j++) row[j] = m[j] != 0 ? row[j] : fill;
    }
}

/* P[r, j] = exp(S[r, j] - lse) for kept keys, 0 for padded ones or when lse is -inf. The
 * exp of a padded key is computed and then replaced (branch-free, so the loop vectorises);
 * its argument is capped at 80 because a padded key's score may exceed the row's lse, which
 * only kept keys made (for kept keys the argument is <= ~0, so the cap never acts). */
TR_SIMD_CLONES static void KFN(probs_from_lse)(REAL *P, const REAL *S, REAL lse, const void *mask,
                                               int mask_dtype, int64_t b, int64_t T)
{
    if (lse == -INFINITY) {
        for (int64_t j = 0; j < T; j++) P[j] = 0;
        return;
    }
#pragma omp simd
    for (int64_t j = 0; j < T; j++) {
        REAL x = S[j] - lse;
        P[j] = KEXP(KCAP(x, 80));
    }
    if (mask) KFN(mask_fill)(P, 0, mask, mask_dtype, b, T);
}

/* Rows [0, nb) of S (T scores each) become softmax probabilities in place, with one exp
 * per score; lse_out[r] = the row's log-sum-exp (-inf, and a row of zeros, when every key
 * is padded). */
TR_SIMD_CLONES static void KFN(softmax_block)(REAL *S, REAL *lse_out, int64_t nb, int64_t T,
                                              const void *mask, int mask_dtype, int64_t b)
{
    for (int64_t r = 0; r < nb; r++) {
        REAL *Sr = S + r * T;
        if (mask) KFN(mask_fill)(Sr, -INFINITY, mask, mask_dtype, b, T);
        REAL mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < T; j++) mx = Sr[j] > mx ? Sr[j] : mx;
        REAL row_lse = -INFINITY;
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < T; j++) Sr[j] = 0;
        } else {
            REAL sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < T; j++) {
                Sr[j] = KEXP(Sr[j] - mx);    /* exp(-inf) = 0 for padded keys */
                sum += Sr[j];
            }
            REAL inv = 1 / sum;
#pragma omp simd
            for (int64_t j = 0; j < T; j++) Sr[j] *= inv;
            /* cppcheck-suppress invalidFunctionArg ; sum >= 1: the row's maximum contributes exp(0) */
            row_lse = mx + log(sum);
        }
        lse_out[r] = row_lse;
    }
}

/* out[j] = in[j] * keep_scale where mask[j] is all ones (kept), else +0; out may be in. A
 * bit select (the product's bits AND the mask): a ?: is control flow to GCC -O2 and kept
 * this loop scalar, and a byte mask beside the floats made it 16-byte vectors only.
 * KFN(attn_bits) is the unsigned integer as wide as REAL (the mask sign-extends to it). */
TR_SIMD_CLONES static void KFN(dropout_rows)(REAL *out, const REAL *in, const uint32_t *mask, int64_t n,
                                             REAL keep_scale)
{
#pragma omp simd
    for (int64_t j = 0; j < n; j++) {
        REAL v = in[j] * keep_scale;
        KFN(attn_bits) bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= (KFN(attn_bits))(int32_t)mask[j];
        memcpy(&out[j], &bits, sizeof bits);
    }
}

/* The softmax backward of rows [0, nb): P[r] = P[r] * (G[r] - <P[r], G[r]>), G = dP. */
TR_SIMD_CLONES static void KFN(dsoftmax_block)(REAL *P, const REAL *G, int64_t nb, int64_t T)
{
    for (int64_t r = 0; r < nb; r++) {
        REAL *Pr = P + r * T;
        const REAL *Gr = G + r * T;
        REAL dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < T; j++) dot += Pr[j] * Gr[j];
#pragma omp simd
        for (int64_t j = 0; j < T; j++) Pr[j] = Pr[j] * (Gr[j] - dot);
    }
}

/* ------------------------------------------------------------ forward */

void KFN(tr_k_attention_fwd)(REAL *out, REAL *lse, const REAL *q, const REAL *k,
                               const REAL *v, const void *mask, int mask_dtype,
                               const tr_attn_dropout *drop, REAL scale, int64_t B, int64_t T,
                               int64_t H, int64_t D, REAL *scratch, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return;
    const int64_t ld = H * D, nblk = (T + TR_ATTN_BLOCK - 1) / TR_ATTN_BLOCK;
    const int use_drop = drop && drop->p > 0;
    const REAL keep_scale = use_drop ? (REAL)1 / (1 - (REAL)drop->p) : 1;
    const int64_t ntask = B * H * nblk;
    int blas_prev = blas_single_begin();
#pragma omp parallel num_threads(nthreads)
    {
        REAL *S = scratch + (size_t)omp_thread() * TR_ATTN_SCRATCH_BUFS * TR_ATTN_BLOCK * T;
        /* cppcheck-suppress invalidPointerCast ; the third buffer holds the block's keep masks */
        uint32_t *keep = (uint32_t *)(S + (size_t)TR_ATTN_BLOCK * T);
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < ntask; task++) {
            int64_t bh = task / nblk, b = bh / H, h = bh % H;
            int64_t i0 = (task % nblk) * TR_ATTN_BLOCK;
            int64_t nb = T - i0 < TR_ATTN_BLOCK ? T - i0 : TR_ATTN_BLOCK;
            const REAL *qb = q + ((b * T + i0) * H + h) * D;
            const REAL *kb = k + (b * T * H + h) * D, *vb = v + (b * T * H + h) * D;
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)T, (int)D, scale, qb,
                 (int)ld, kb, (int)ld, 0, S, (int)T);
            KFN(softmax_block)(S, lse + bh * T + i0, nb, T, mask, mask_dtype, b);
            if (use_drop) {   /* the block's rows are consecutive in the stream: one draw */
                drop->keep(keep, (size_t)(nb * T), drop->p, drop->key, (uint64_t)((bh * T + i0) * T));
                KFN(dropout_rows)(S, S, keep, nb * T, keep_scale);
            }
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nb, (int)D, (int)T, 1, S,
                 (int)T, vb, (int)ld, 0, out + ((b * T + i0) * H + h) * D, (int)ld);
        }
    }
    blas_single_end(blas_prev);
}

/* ------------------------------------------------------------ backward */

void KFN(tr_k_attention_bwd)(REAL *dq, REAL *dk, REAL *dv, const REAL *dout,
                                const REAL *q, const REAL *k, const REAL *v,
                                const REAL *lse, const void *mask, int mask_dtype,
                                const tr_attn_dropout *drop, REAL scale, int64_t B, int64_t T,
                                int64_t H, int64_t D, REAL *scratch, int nthreads)
{
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return;
    const int64_t ld = H * D;
    const int use_drop = drop && drop->p > 0;
    const REAL keep_scale = use_drop ? (REAL)1 / (1 - (REAL)drop->p) : 1;
    /* One task per (b, h): dk and dv of a head are sums over all its query blocks, and
     * only this task writes them. */
    int blas_prev = blas_single_begin();
#pragma omp parallel num_threads(nthreads)
    {
        REAL *P = scratch + (size_t)omp_thread() * TR_ATTN_SCRATCH_BUFS * TR_ATTN_BLOCK * T;
        REAL *G = P + (size_t)TR_ATTN_BLOCK * T;
        /* cppcheck-suppress invalidPointerCast ; the third buffer holds the block's keep masks */
        uint32_t *keep = (uint32_t *)(G + (size_t)TR_ATTN_BLOCK * T);
#pragma omp for schedule(dynamic)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            const REAL *kb = k + (b * T * H + h) * D, *vb = v + (b * T * H + h) * D;
            REAL *dkb = dk + (b * T * H + h) * D, *dvb = dv + (b * T * H + h) * D;
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++) dkb[t * ld + d] = dvb[t * ld + d] = 0;
            for (int64_t i0 = 0; i0 < T; i0 += TR_ATTN_BLOCK) {
                int64_t nb = T - i0 < TR_ATTN_BLOCK ? T - i0 : TR_ATTN_BLOCK;
                const REAL *qb = q + ((b * T + i0) * H + h) * D;
                const REAL *dob = dout + ((b * T + i0) * H + h) * D;
                /* P = softmax probabilities (before dropout) of the block, from lse */
                GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)T, (int)D, scale, qb,
                     (int)ld, kb, (int)ld, 0, P, (int)T);
                for (int64_t r = 0; r < nb; r++)
                    KFN(probs_from_lse)(P + r * T, P + r * T, lse[bh * T + i0 + r], mask,
                                        mask_dtype, b, T);
                /* dv += Pd^T dout, Pd the dropped-out probabilities (built in G) */
                const REAL *Pd = P;
                if (use_drop) {
                    drop->keep(keep, (size_t)(nb * T), drop->p, drop->key, (uint64_t)((bh * T + i0) * T));
                    KFN(dropout_rows)(G, P, keep, nb * T, keep_scale);
                    Pd = G;
                }
                GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)nb, 1, Pd,
                     (int)T, dob, (int)ld, 1, dvb, (int)ld);
                /* G = dPd = dout v^T; dP = dPd * keep / (1-p); dS = P (dP - rowsum(P dP)) */
                GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)T, (int)D, 1, dob,
                     (int)ld, vb, (int)ld, 0, G, (int)T);
                if (use_drop) KFN(dropout_rows)(G, G, keep, nb * T, keep_scale);
                KFN(dsoftmax_block)(P, G, nb, T);
                /* dq = scale dS k; dk += scale dS^T q */
                GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nb, (int)D, (int)T, scale, P,
                     (int)T, kb, (int)ld, 0, dq + ((b * T + i0) * H + h) * D, (int)ld);
                GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)D, (int)nb, scale, P,
                     (int)T, qb, (int)ld, 1, dkb, (int)ld);
            }
        }
    }
    blas_single_end(blas_prev);
}
