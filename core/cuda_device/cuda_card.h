/* cuda_card.h — a CUDA card as the driver describes it, and the paragraphs that tell a user
 * why a card or driver cannot run this build (cuda_card.c). The device backend
 * (cuda_context_backend.c) answers tr_cuda_device_card and tr_cuda_unavailable_reason
 * (ctx.h) through these; cuda_device.c asks for the no-code paragraph when it opens a device.
 * Only in builds with the CUDA backend (TR_HAVE_CUDA). */
#ifndef TR_CUDA_CARD_H
#define TR_CUDA_CARD_H

#include "ctx.h"

/* Fills *card for `device` (tr_cuda_device_card's contract in ctx.h). */
int tr_cuda_card_of(int device, tr_cuda_card *card);

/* Visible CUDA devices, 0 when there is none; when the runtime refused the driver (older than
 * the runtime), remembers why for tr_cuda_card_unavailable. Never an error. */
int tr_cuda_card_count(void);

/* The paragraph of the last refusal tr_cuda_card_count saw, or "". */
const char *tr_cuda_card_unavailable(void);

/* The compute capability of `device` as 10 * major + minor, read once per device; 0 when it
 * does not exist. For checks made on every op call (cuda_backend.c). */
int tr_cuda_card_cc(int device);

/* Fails err (TR_EUSER) with the paragraph for a card this binary carries no code for
 * (cudaErrorNoKernelImageForDevice at the first launch): the card, its compute capability,
 * the targets built, and which bundle runs it. Returns TR_EUSER. */
int tr_cuda_card_no_code(int device, tr_error *err);

#endif
