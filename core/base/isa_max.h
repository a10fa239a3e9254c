/* isa_max.h — the widest x86 vector ISA this build's run-time choices may pick. A normal build
 * picks by the CPU alone. `make ISA_MAX=avx2` (-DTR_ISA_MAX_AVX2) builds a binary that runs
 * the AVX2 + FMA code everywhere an AVX-512 CPU would run AVX-512: the kernels' clones, the
 * attention tiles, the dropout's Philox, OpenBLAS's kernel set and oneDNN's. It measures on an
 * AVX-512 machine what an AVX2-only CPU runs (bench/vs_pytorch.sh ISA=avx2); a shipped binary
 * is never built so. */
#ifndef TR_ISA_MAX_H
#define TR_ISA_MAX_H

#ifdef TR_ISA_MAX_AVX2
#define TR_ISA_AVX512_ALLOWED 0
#else
#define TR_ISA_AVX512_ALLOWED 1
#endif

#endif
