/* dropout_impl.h — body of the dropout kernel over REAL / KFN(name) (see dropout.c).
 * The keep mask is regenerated from the keyed RNG by the caller for each chunk, never
 * stored across forward and backward; this kernel only applies it. */

/* out[i] = keep[i] ? x[i] * scale : 0 (=), with scale = 1/(1-p). The same call is the
 * backward: dx = dropout_apply(dout) with the regenerated mask. out may alias x. */
void KFN(tr_k_dropout_fwd)(REAL *out, const REAL *x, const uint8_t *keep, REAL scale, int64_t n)
{
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) out[i] = keep[i] ? x[i] * scale : (REAL)0;
}
