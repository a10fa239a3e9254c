/* dropout_impl.h — body of the dropout kernel over REAL / KFN(name) (see dropout.c).
 * The keep mask is regenerated from the keyed RNG by the caller for each chunk, never
 * stored across forward and backward; this kernel only applies it. */

/* One span, as a bit select (the value's bits AND all-ones or zero) in `omp simd` under the
 * AVX-512 / AVX2 clones: the scalar loop with its branch per element was ~5 % of a
 * short-text LoRA step, and GCC vectorises neither the branch nor a ?: on a byte. A dropped
 * element is +0 even where x is not finite, as before. KFN(dropout_bits) is the unsigned
 * integer as wide as REAL (dropout.c). */
TR_SIMD_CLONES static void KFN(dropout_span)(REAL *out, const REAL *x, const uint8_t *keep, REAL scale, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        REAL v = x[i] * scale;
        KFN(dropout_bits) b;
        memcpy(&b, &v, sizeof b);
        b &= (KFN(dropout_bits))0 - (KFN(dropout_bits))keep[i];
        memcpy(&out[i], &b, sizeof b);
    }
}

/* out[i] = keep[i] ? x[i] * scale : 0 (=), with scale = 1/(1-p). The same call is the
 * backward: dx = dropout_apply(dout) with the regenerated mask. out may alias x. */
void KFN(tr_k_dropout_fwd)(REAL *out, const REAL *x, const uint8_t *keep, REAL scale, int64_t n)
{
    const int64_t span = 16384, nspan = (n + span - 1) / span;
#pragma omp parallel for if (n > 65536)
    for (int64_t s = 0; s < nspan; s++) {
        int64_t start = s * span, len = n - start < span ? n - start : span;
        KFN(dropout_span)(out + start, x + start, keep + start, scale, len);
    }
}
