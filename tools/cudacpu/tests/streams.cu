/* streams.cu (cudacpu tests) — stream semantics under CUDACPU_STREAMS=deferred (cases that
 * end in _sync check what the default mode does instead): a missing cudaStreamWaitEvent
 * between a copy stream and a compute stream gives stale data and the wait gives the right
 * data; a pinned buffer rewritten before its copy's event is seen rewritten on the device,
 * a pageable one is not; a copy into pinned memory lands only when it runs; the legacy stream
 * waits for blocking streams but not non-blocking ones; a kernel failure surfaces at the
 * synchronisation that runs it; event queries answer cudaErrorNotReady before the work ran;
 * a launch runs correctly after its caller returned; host threads may use CUDA at once. */
#include "check.h"

#include <thread>
#include <vector>

static const int N = 1024;

__global__ void scale_kernel(float *out, const float *in, float k, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * k;
}

__global__ void diverged_kernel(float *out)
{
    float v = 1.0f;
    if (threadIdx.x < 16)
        v = __shfl_xor_sync(0xffffffffu, v, 1);
    else
        v = __shfl_xor_sync(0xffffffffu, v, 2);
    out[threadIdx.x] = v;
}

static bool deferred() { return env_is("CUDACPU_STREAMS", "sync", "deferred"); }

static float *dev_zeros()
{
    float *d;
    CUDA_OK(cudaMalloc((void **)&d, N * sizeof(float)));
    CUDA_OK(cudaMemset(d, 0, N * sizeof(float)));
    CUDA_OK(cudaDeviceSynchronize());
    return d;
}

/* a copy stream uploads ones into a; a compute stream doubles a into b; b comes back */
static float copy_then_compute(bool wait)
{
    static float ones[N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    float *a = dev_zeros(), *b = dev_zeros(), h[N];
    cudaStream_t copy, compute;
    cudaEvent_t uploaded;
    new_streams({ &copy, &compute });
    CUDA_OK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
    CUDA_OK(cudaMemcpyAsync(a, ones, sizeof ones, cudaMemcpyHostToDevice, copy));
    CUDA_OK(cudaEventRecord(uploaded, copy));
    if (wait) CUDA_OK(cudaStreamWaitEvent(compute, uploaded, 0));
    scale_kernel<<<N / 256, 256, 0, compute>>>(b, a, 2.0f, N);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpyAsync(h, b, sizeof h, cudaMemcpyDeviceToHost, compute)); /* pageable: returns when done */
    CUDA_OK(cudaStreamSynchronize(compute));
    const float got = h[N - 1];
    CUDA_OK(cudaStreamSynchronize(copy));
    CUDA_OK(cudaEventDestroy(uploaded));
    destroy_streams({ copy, compute });
    free_device({ a, b });
    return got;
}

static void missing_wait()
{
    const float got = copy_then_compute(false);
    CHECK(got == (deferred() ? 0.0f : 2.0f), "without the wait the compute stream read %g", got);
}
static void missing_wait_twin() { CHECK(copy_then_compute(true) == 2.0f, "with the wait the result is wrong"); }

/* the host rewrites its upload buffer before the copy's event says the copy finished */
static float rewrite_before_event(bool pinned, bool sync_first)
{
    float *hbuf, *d = dev_zeros(), back[N];
    if (pinned) CUDA_OK(cudaHostAlloc((void **)&hbuf, N * sizeof(float), cudaHostAllocDefault));
    else hbuf = (float *)malloc(N * sizeof(float));
    CHECK(hbuf, "no host buffer");
    for (int i = 0; i < N; i++) hbuf[i] = 1.0f;
    cudaStream_t s;
    cudaEvent_t done;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&done));
    CUDA_OK(cudaMemcpyAsync(d, hbuf, N * sizeof(float), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaEventRecord(done, s));
    if (sync_first) CUDA_OK(cudaEventSynchronize(done));
    for (int i = 0; i < N; i++) hbuf[i] = 5.0f; /* reused for the next batch */
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaEventDestroy(done));
    if (pinned) CUDA_OK(cudaFreeHost(hbuf));
    else free(hbuf);
    CUDA_OK(cudaFree(d));
    return back[0];
}

static void pinned_rewrite()
{
    const float got = rewrite_before_event(true, false);
    CHECK(got == (deferred() ? 5.0f : 1.0f), "the device holds %g", got);
}
static void pinned_rewrite_twin()
{
    CHECK(rewrite_before_event(true, true) == 1.0f, "after the event the device holds the wrong data");
    CHECK(rewrite_before_event(false, false) == 1.0f, "a pageable source was not staged at the call");
}

static void pinned_download()
{
    float *d = dev_zeros(), *h;
    CUDA_OK(cudaHostAlloc((void **)&h, N * sizeof(float), cudaHostAllocDefault));
    for (int i = 0; i < N; i++) h[i] = -1.0f;
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMemsetAsync(d, 0, N * sizeof(float), s));
    CUDA_OK(cudaMemcpyAsync(h, d, N * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(h[0] == (deferred() ? -1.0f : 0.0f), "before the sync the pinned buffer holds %g", h[0]);
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK(h[0] == 0.0f, "after the sync the pinned buffer holds %g", h[0]);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFreeHost(h));
    CUDA_OK(cudaFree(d));
}

/* work on a stream, then a blocking copy on the legacy stream: it waits for a blocking
 * stream's work, not for a non-blocking one's */
static float legacy_after(unsigned flags)
{
    static float ones[N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    float *a = dev_zeros(), *b = dev_zeros(), h[N];
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, flags));
    CUDA_OK(cudaMemcpyAsync(a, ones, sizeof ones, cudaMemcpyHostToDevice, s));
    scale_kernel<<<N / 256, 256, 0, s>>>(b, a, 3.0f, N);
    CUDA_OK(cudaMemcpy(h, b, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaStreamDestroy(s));
    free_device({ a, b });
    return h[0];
}

static void legacy_stream()
{
    CHECK(legacy_after(cudaStreamDefault) == 3.0f, "the legacy stream did not wait for a blocking stream");
    const float nb = legacy_after(cudaStreamNonBlocking);
    CHECK(nb == (deferred() ? 0.0f : 3.0f), "after a non-blocking stream's work the legacy copy read %g", nb);
}

static void launch_error_at_sync()
{
    float *d = dev_zeros();
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    diverged_kernel<<<1, 32, 0, s>>>(d);
    const cudaError_t at_launch = cudaGetLastError();
    const cudaError_t at_sync = cudaStreamSynchronize(s);
    if (deferred()) {
        CHECK(at_launch == cudaSuccess, "the launch itself returned %s", cudaGetErrorName(at_launch));
        CHECK(at_sync == cudaErrorLaunchFailure, "the sync returned %s", cudaGetErrorName(at_sync));
    } else {
        CHECK(at_launch == cudaErrorLaunchFailure, "the launch returned %s", cudaGetErrorName(at_launch));
    }
    CHECK(strstr(cudaGetErrorString(cudaErrorLaunchFailure), "diverged_kernel"), "the error text lacks the kernel");
    (void)cudaGetLastError();
    CUDA_OK(cudaStreamSynchronize(s)); /* reported once */
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
}

static void event_query()
{
    float *d = dev_zeros();
    cudaStream_t s;
    cudaEvent_t e, never;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&e));
    CUDA_OK(cudaEventCreate(&never));
    CUDA_OK(cudaEventQuery(never)); /* never recorded: complete */
    CUDA_OK(cudaMemsetAsync(d, 0, N * sizeof(float), s));
    CUDA_OK(cudaEventRecord(e, s));
    const cudaError_t first = cudaEventQuery(e);
    CHECK(first == (deferred() ? cudaErrorNotReady : cudaSuccess), "the first query returned %s",
          cudaGetErrorName(first));
    int polls = 0;
    while (cudaEventQuery(e) == cudaErrorNotReady) CHECK(++polls < 3, "the event never completes");
    float ms = -1;
    CUDA_OK(cudaEventElapsedTime(&ms, e, e));
    destroy_events({ e, never });
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(d));
}

/* the launch's arguments are the caller's locals, gone before the stream runs it */
static void launch_from(cudaStream_t s, float *out, const float *in)
{
    const float k = 4.0f;
    const int n = N;
    scale_kernel<<<N / 256, 256, 0, s>>>(out, in, k, n);
}

/* writes over the stack where launch_from's frame was */
static __attribute__((noinline)) int clobber_stack()
{
    volatile char b[4096];
    for (int i = 0; i < 4096; i++) b[i] = (char)0x7f;
    return b[100];
}

static void launch_outlives_caller()
{
    static float ones[N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    float *a = dev_zeros(), *b = dev_zeros(), h[N];
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaMemcpyAsync(a, ones, sizeof ones, cudaMemcpyHostToDevice, s));
    launch_from(s, b, a);
    CHECK(clobber_stack() == 0x7f, "the stack was not overwritten");
    CUDA_OK(cudaMemcpyAsync(h, b, sizeof h, cudaMemcpyDeviceToHost, s));
    for (int i = 0; i < N; i++) CHECK(h[i] == 4.0f, "b[%d] = %g", i, h[i]);
    CUDA_OK(cudaStreamDestroy(s));
    free_device({ a, b });
}

static void host_threads()
{
    const int T = 4, R = 20;
    std::vector<std::thread> th;
    std::vector<int> bad(T, 0);
    for (int t = 0; t < T; t++)
        th.emplace_back([t, &bad]() {
            float *a, *b, h[N], src[N];
            for (int i = 0; i < N; i++) src[i] = (float)(i + t);
            cudaStream_t s;
            if (cudaMalloc((void **)&a, sizeof h) || cudaMalloc((void **)&b, sizeof h) || cudaStreamCreate(&s)) {
                bad[t] = 1;
                return;
            }
            for (int r = 0; r < R; r++) {
                cudaMemcpyAsync(a, src, sizeof src, cudaMemcpyHostToDevice, s);
                scale_kernel<<<N / 256, 256, 0, s>>>(b, a, (float)(r + 1), N);
                cudaMemcpyAsync(h, b, sizeof h, cudaMemcpyDeviceToHost, s);
                if (cudaStreamSynchronize(s) != cudaSuccess) bad[t] = 1;
                for (int i = 0; i < N; i++)
                    if (h[i] != (float)(i + t) * (float)(r + 1)) bad[t] = 1;
            }
            cudaStreamDestroy(s);
            cudaFree(a);
            cudaFree(b);
        });
    for (auto &x : th) x.join();
    for (int t = 0; t < T; t++) CHECK(!bad[t], "host thread %d saw a wrong result", t);
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"missing_wait", missing_wait},
        {"missing_wait_twin", missing_wait_twin},
        {"pinned_rewrite", pinned_rewrite},
        {"pinned_rewrite_twin", pinned_rewrite_twin},
        {"pinned_download", pinned_download},
        {"legacy_stream", legacy_stream},
        {"launch_error_at_sync", launch_error_at_sync},
        {"event_query", event_query},
        {"launch_outlives_caller", launch_outlives_caller},
        {"host_threads", host_threads},
    };
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
