/* device_errors.h — errors the device finds and the host learns of later. The ops that take
 * indices (embedding ids, cross-entropy targets) check them on a CUDA device with a kernel
 * instead of a copy to the host (so a training step never waits for the device): the first
 * bad index goes into the device's error word (core/cuda_device/cuda_device.h), and the op goes on
 * with that index left out. The host asks here at the points where it synchronises anyway (a
 * logged step, the end of an evaluation, a checkpoint, the end of a run: trainer.train.run)
 * and fails then with the CPU's user error for the op, which stops at once. */
#ifndef TR_DEVICE_ERRORS_H
#define TR_DEVICE_ERRORS_H

#include "ctx.h"

/* TR_OK when `device` (TR_CPU or a CUDA ordinal) has recorded no error; else TR_EUSER with
 * the op's message in ctx's error, naming the index, its position, the device and the fix, and
 * the word cleared (the next error is recorded afresh). Reading the word is one copy to the
 * host and one stream synchronisation (counted, host_sync.h). TR_CPU, a device never used,
 * and a build without CUDA have nothing to report. */
int tr_device_errors_check(tr_ctx *ctx, int device);

#endif
