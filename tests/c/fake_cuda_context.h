/* fake_cuda_context.h — the context side of fake_cuda_runtime.h: the per-device CUDA state
 * and stream that the code under test asks its context for (tr_ctx_cuda_state and
 * tr_cuda_stream, #defined to these names before that code is included), one fake stream
 * per fake device. Include once per test program, after the code under test (it needs
 * tr_ctx and tr_fail) and fake_cuda_runtime.h (fake_streams). */
#ifndef TR_FAKE_CUDA_CONTEXT_H
#define TR_FAKE_CUDA_CONTEXT_H

static int fake_states[FAKE_DEVICES];

void *fake_ctx_cuda_state(tr_ctx *ctx, int device)
{
    if (device < 0 || device >= FAKE_DEVICES) {
        tr_fail(tr_ctx_err(ctx), TR_EUSER, "cuda:%d does not exist (fake)", device);
        return NULL;
    }
    fake_streams[device].device = device;
    return &fake_states[device];
}

void *fake_cuda_stream(void *state) { return &fake_streams[(int *)state - fake_states]; }

#endif
