/* card.h — what the current CUDA device can run, for launchers that choose a path by card
 * (card.cu): its compute capability, read once per device, and which tensor-core element
 * types it has. The fat binary carries every kernel for every target (arch.cuh compiles a
 * kernel a target lacks the hardware for to a trap), so the choice is made here, at run time,
 * before anything is launched. Host launchers' header under launcher.h's contract. */
#ifndef TR_KERNELS_CUDA_CARD_H
#define TR_KERNELS_CUDA_CARD_H

#include "cuda/launcher.h"

TR_K_BEGIN_DECLS

/* The current device's compute capability as 10 * major + minor (75 for a T4, 86 for an
 * A10, 90 for an H100), read once per device ordinal; 0 when it cannot be read. */
int tr_k_cuda_cc(void);

/* 1 when the tensor cores of a card of compute capability cc take 16-bit operands of dtype
 * dt with f32 accumulation (WMMA): f16 from sm_70, bf16 from sm_80; else 0. */
int tr_k_mma_takes(int dt, int cc);

/* The targets this binary was built for, as "sm_75, sm_80, ... and PTX compute_120 for later
 * cards" (the Makefile's CUDA_ARCHS and CUDA_PTX). */
const char *tr_k_cuda_targets(void);

/* Launches an empty kernel on stream: returns the launch's cudaError_t as an int (cudaSuccess,
 * 0, or cudaErrorNoKernelImageForDevice when the binary carries no code for the current card),
 * with the runtime's last error cleared. Does not wait for the stream. */
int tr_k_cuda_probe(void *stream);

TR_K_END_DECLS

#endif
