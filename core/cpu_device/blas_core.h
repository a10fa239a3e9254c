/* blas_core.h — makes OpenBLAS use the GEMM kernels this CPU can run when its own CPU
 * detection fell back to an older kernel set.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from the CPU's
 * family/model number at load time. A model it does not know (0.3.21 and Intel's model
 * 207, Emerald Rapids, as cloud VMs report it) falls back to "Prescott", SSE3 kernels: a
 * third of the speed of its AVX-512 ones on this project's development machine. The fix
 * goes by the CPU's features instead: when the chosen kernel set uses less of the ISA than
 * the CPU has (AVX-512 F/BW/DQ/VL -> SkylakeX, AVX2 + FMA -> Haswell, AVX -> Sandybridge),
 * the library is re-initialised with OpenBLAS's own OPENBLAS_CORETYPE mechanism
 * (gotoblas_dynamic_quit + gotoblas_dynamic_init, exported by DYNAMIC_ARCH builds and looked
 * up at run time, so any other BLAS build links and simply keeps its choice). A user's own
 * OPENBLAS_CORETYPE is always respected. An AVX2-only AMD machine is detected correctly by
 * OpenBLAS (Zen) and left alone. */
#ifndef TR_BLAS_CORE_H
#define TR_BLAS_CORE_H

/* Runs the check once per process (pthread_once; the host backend's setup, which tr_ctx_new
 * runs before any GEMM can run). Thread-safe; later calls do nothing. */
void tr_blas_core_setup(void);

/* The kernel set OpenBLAS uses now ("SkylakeX", "Haswell", ...), or "unknown" for a BLAS
 * that does not say. */
const char *tr_blas_core_name(void);

/* The ISA rank of a kernel-set name (0 SSE, 1 AVX, 2 AVX2, 3 AVX-512; -1 unknown name) and
 * of this CPU, as tr_blas_core_setup compares them. */
int tr_blas_core_rank(const char *core);
int tr_blas_cpu_rank(void);

#endif
