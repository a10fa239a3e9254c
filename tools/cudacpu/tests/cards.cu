/* cards.cu (cudacpu tests) — the card the emulator pretends (CUDACPU_ARCH) and the driver it
 * pretends (CUDACPU_DRIVER), as a program built for one target meets them:
 *   props            the device properties name the card and give its compute capability
 *   arch_macro       device code sees __CUDA_ARCH__ = 10 x the build's CUDACPU_ARCH
 *   launch           a launch on a card at or above the build's target runs
 *   no_image         on a card below it the launch fails with cudaErrorNoKernelImageForDevice
 *   trap             __trap() fails the launch, naming the line
 *   driver           a driver older than the runtime: cudaErrorInsufficientDriver from the
 *                    device calls, the versions still readable
 * run.sh builds it at the default target (90) and runs the cases under several settings;
 * bf16_fragment.cu checks that bf16 WMMA does not compile below sm_80. */
#include "check.h"

__global__ void arch_kernel(int *out) { *out = __CUDA_ARCH__; }

__global__ void trap_kernel(int *out)
{
    if (threadIdx.x == 3) __trap();
    out[threadIdx.x] = 1;
}

static int want_arch() { return atoi(env_or("CUDACPU_ARCH", "90")); }

static void props()
{
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    CHECK(10 * p.major + p.minor == want_arch(), "compute capability %d.%d, CUDACPU_ARCH %d", p.major, p.minor,
          want_arch());
    char sm[32];
    snprintf(sm, sizeof sm, "sm_%d", want_arch());
    CHECK(strstr(p.name, sm) != nullptr, "name %s lacks %s", p.name, sm);
}

static void arch_macro()
{
    int *d, h = 0;
    CUDA_OK(cudaMalloc((void **)&d, sizeof *d));
    arch_kernel<<<1, 32>>>(d);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h == 10 * CUDACPU_BUILT_ARCH, "__CUDA_ARCH__ %d, built for %d", h, CUDACPU_BUILT_ARCH);
    free_device({d});
}

static void launch()
{
    int *d;
    CUDA_OK(cudaMalloc((void **)&d, sizeof *d));
    arch_kernel<<<1, 32>>>(d);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    free_device({d});
}

static void no_image()
{
    int *d;
    CUDA_OK(cudaMalloc((void **)&d, sizeof *d));
    arch_kernel<<<1, 32>>>(d);
    const cudaError_t e = cudaGetLastError();
    CHECK(e == cudaErrorNoKernelImageForDevice, "launch returned %s", cudaGetErrorName(e));
    CHECK(!strcmp(cudaGetErrorString(e), "no kernel image is available for execution on the device"), "string %s",
          cudaGetErrorString(e));
    free_device({d});
}

static void trap()
{
    int *d;
    CUDA_OK(cudaMalloc((void **)&d, 32 * sizeof *d));
    trap_kernel<<<1, 32>>>(d);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    CHECK(e == cudaErrorLaunchFailure, "a trapping kernel returned %s", cudaGetErrorName(e));
    CHECK(strstr(cudacpu_last_failure(), "__trap()") != nullptr, "failure: %s", cudacpu_last_failure());
    free_device({d});
}

static void driver()
{
    int n = -1, dv = 0, rv = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaErrorInsufficientDriver && n == 0, "device count %d", n);
    (void)cudaGetLastError();
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0) == cudaErrorInsufficientDriver, "properties answered");
    CHECK(cudaSetDevice(0) == cudaErrorInsufficientDriver, "set device answered");
    (void)cudaGetLastError();
    CUDA_OK(cudaDriverGetVersion(&dv));
    CUDA_OK(cudaRuntimeGetVersion(&rv));
    CHECK(dv == atoi(env_or("CUDACPU_DRIVER", "13000")) && rv == 13000, "driver %d, runtime %d", dv, rv);
    CHECK(!strcmp(cudaGetErrorString(cudaErrorInsufficientDriver),
                  "CUDA driver version is insufficient for CUDA runtime version"),
          "string %s", cudaGetErrorString(cudaErrorInsufficientDriver));
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {{"props", props},   {"arch_macro", arch_macro}, {"launch", launch},
                                      {"no_image", no_image}, {"trap", trap},           {"driver", driver}};
    return run_case(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
