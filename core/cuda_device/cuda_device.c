/* cuda_device.c — a CUDA device's allocator backend, stream, cuBLASLt handle and
 * workspace (contract in cuda_device.h).
 *
 * The raw backend carries only the device ordinal (in its user pointer), so that the
 * allocator can outlive the state and be destroyed in either order. Each raw call makes
 * its device current and restores the caller's device afterwards: the allocator may be
 * used from code that has another device current.
 *
 * cuBLASLt is loaded lazily (kernels/cuda/cublaslt_api.h): the binary does not link it,
 * and the device state dlopens it, resolves its functions into the state's table and
 * creates the handle when the device's cuBLASLt environment is first asked for (the first
 * matrix product). A failure is kept as a message in the state and returned by every
 * product on that device, so it is reported where it matters, not at start.
 *
 * The whole file is compiled only with TR_HAVE_CUDA: the ASan test build has no CUDA. */
#ifdef TR_HAVE_CUDA

#include "cuda_device.h"
#include "cuda_card.h"
#include "cuda/card.h"
#include "cuda/cublaslt_api.h"
#include "cuda/cuda_check.h"
#include "cuda/matmul.h"
#include "cuda/index_check.h"
#include "cuda_sync.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

struct tr_cuda_state {
    int device;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    tr_cuda_blas blas;   /* what kernels see: lt, api, stream, workspace, plan cache */
    void *lt_lib;        /* dlopen handle of libcublasLt, NULL until loaded */
    int lt_tried;        /* 1 once loading was attempted (success or the message below) */
    tr_cublaslt_api api;
    char lt_error[768];
    tr_k_index_error *index_error;   /* the error word of the ops' index checks (cuda_device.h) */
};

static const char *const device_names[TR_CUDA_MAX_DEVICES] = {
    "cuda:0", "cuda:1", "cuda:2",  "cuda:3",  "cuda:4",  "cuda:5",  "cuda:6",  "cuda:7",
    "cuda:8", "cuda:9", "cuda:10", "cuda:11", "cuda:12", "cuda:13", "cuda:14", "cuda:15",
};

/* ------------------------------------------------------------ device count */

/* No driver, or no device, is not an error for a runtime that can use the CPU; a driver older
 * than the runtime is remembered for the messages (cuda_card.c). */
int tr_cuda_count_devices(void) { return tr_cuda_card_count(); }

uint64_t tr_cuda_memory_bytes(int device)
{
    if (device < 0 || device >= tr_cuda_count_devices()) return 0;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();   /* a failed query is "unknown", not an error */
        return 0;
    }
    return (uint64_t)prop.totalGlobalMem;
}

/* ------------------------------------------------------------ raw backend */

/* Makes `device` current; *prev receives the caller's device. 0 on success. */
static int enter_device(int device, int *prev)
{
    if (cudaGetDevice(prev) != cudaSuccess) *prev = device;
    if (*prev != device && cudaSetDevice(device) != cudaSuccess) return -1;
    return 0;
}

static void leave_device(int device, int prev)
{
    if (prev != device) (void)cudaSetDevice(prev);
}

static void *raw_cuda_alloc(void *user, size_t size)
{
    int device = (int)(uintptr_t)user, prev;
    void *p = NULL;
    if (enter_device(device, &prev) != 0) {
        (void)cudaGetLastError();
        return NULL;
    }
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
        /* Out of memory is reported by the allocator (with its ledger); clear the error
         * so that the next launch check does not see it. Other errors surface at the
         * next checked call, which is sticky-error honest. */
        (void)cudaGetLastError();
        p = NULL;
    }
    leave_device(device, prev);
    return p;
}

static void raw_cuda_free(void *user, void *ptr, size_t size)
{
    int device = (int)(uintptr_t)user, prev;
    if (enter_device(device, &prev) != 0) {
        (void)cudaGetLastError();
        return;
    }
    /* cudaFree synchronises the device. A failure here (a sticky error from an earlier
     * kernel) has no caller to tell and already shows at the next checked call. */
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
    leave_device(device, prev);
}

/* The device's total and free bytes as the driver counts them (the allocator's mem_info). */
static int raw_cuda_mem_info(void *user, uint64_t *total, uint64_t *free_bytes)
{
    int device = (int)(uintptr_t)user, prev;
    size_t f = 0, t = 0;
    if (enter_device(device, &prev) != 0) {
        (void)cudaGetLastError();
        return -1;
    }
    cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) (void)cudaGetLastError();   /* "cannot say": the report leaves it out */
    leave_device(device, prev);
    *total = t;
    *free_bytes = f;
    return e == cudaSuccess ? 0 : -1;
}

/* ------------------------------------------------------------ state */

static void state_destroy(struct tr_cuda_state *s)
{
    if (!s) return;
    int prev;
    if (enter_device(s->device, &prev) == 0) {
        /* Teardown: failures have nowhere to go; the stream is drained first so that no
         * kernel still uses the workspace or the handle. */
        if (s->stream) (void)tr_sync_stream(s->stream);
        tr_cuda_gemm_cache_free(s->blas.cache);
        if (s->lt) (void)s->api.cublasLtDestroy(s->lt);
        if (s->stream) (void)cudaStreamDestroy(s->stream);
        if (s->index_error) (void)cudaFree(s->index_error);
        (void)cudaGetLastError();
        leave_device(s->device, prev);
    }
    if (s->lt_lib) (void)dlclose(s->lt_lib);
    free(s);
}

int tr_cuda_init_device(tr_ctx *ctx, int device, tr_alloc **out_alloc, void **out_state, tr_error *err)
{
    *out_alloc = NULL;
    *out_state = NULL;
    int count = tr_cuda_count_devices();
    if (device < 0 || device >= count || device >= TR_CUDA_MAX_DEVICES)
        return tr_fail(err, TR_EUSER,
                       "cuda:%d does not exist: %d CUDA device(s) are visible to this process%s. Use "
                       "device = \"cuda:0\" .. \"cuda:%d\", \"auto\" or \"cpu\" (check CUDA_VISIBLE_DEVICES "
                       "and nvidia-smi).",
                       device, count, count > TR_CUDA_MAX_DEVICES ? " (trainer addresses the first 16)" : "",
                       count > 0 ? count - 1 : 0);

    struct tr_cuda_state *s = calloc(1, sizeof *s);
    if (!s) return tr_fail(err, TR_EOOM, "tr_cuda_init_device: out of host memory.");
    s->device = device;

    int prev, rc;
    if (enter_device(device, &prev) != 0) {
        free(s);
        return TR_CUDA_CALL(err, cudaSetDevice(device));
    }
    tr_alloc *alloc = NULL;
    void *workspace = NULL;
    if ((rc = TR_CUDA_CALL(err, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking))) != TR_OK) goto fail;
    /* A card the fat binary has no code for fails its first launch: find out now, before
     * anything is allocated, and say which build runs it. */
    const int probe = tr_k_cuda_probe(s->stream);
    if (probe == (int)cudaErrorNoKernelImageForDevice) {
        rc = tr_cuda_card_no_code(device, err);
        goto fail;
    }
    if ((rc = TR_CUDA_CALL(err, (cudaError_t)probe)) != TR_OK) goto fail;
    if ((rc = tr_cuda_gemm_cache_new(&s->blas.cache, err)) != TR_OK) goto fail;
    if ((rc = TR_CUDA_CALL(err, cudaMalloc((void **)&s->index_error, sizeof *s->index_error))) != TR_OK ||
        (rc = TR_CUDA_CALL(err, cudaMemsetAsync(s->index_error, 0, sizeof *s->index_error, s->stream))) != TR_OK)
        goto fail;

    tr_cuda_card card;
    char card_text[300] = "";
    if (tr_cuda_card_of(device, &card) == TR_OK)
        snprintf(card_text, sizeof card_text, "%s, compute capability %d.%d", card.name, card.major, card.minor);
    tr_raw_backend backend = {
        .raw_alloc = raw_cuda_alloc,
        .raw_free = raw_cuda_free,
        .user = (void *)(uintptr_t)device,
        .device_name = device_names[device],
        .device_card = card_text,
        .mem_info = raw_cuda_mem_info,
    };
    alloc = tr_alloc_new(&backend);
    if (!alloc) {
        rc = tr_fail(err, TR_EOOM, "tr_cuda_init_device: out of host memory for the cuda:%d allocator.", device);
        goto fail;
    }
    if ((rc = tr_alloc_malloc(alloc, TR_CUDA_WORKSPACE_BYTES, TR_TAG_WORKSPACE, (uintptr_t)s->stream, &workspace,
                              err)) != TR_OK)
        goto fail;

    s->blas.stream = s->stream;
    s->blas.workspace = workspace;
    s->blas.workspace_bytes = TR_CUDA_WORKSPACE_BYTES;
    leave_device(device, prev);
    *out_alloc = alloc;
    *out_state = s;
    return TR_OK;

fail:
    leave_device(device, prev);
    if (alloc) tr_alloc_destroy(alloc);
    state_destroy(s);
    return rc;
}

void tr_cuda_release_device(void *state) { state_destroy(state); }

/* ------------------------------------------------------------ accessors */

void *tr_cuda_stream(void *state) { return state ? (void *)((struct tr_cuda_state *)state)->stream : NULL; }

/* ------------------------------------------------------------ cuBLASLt, loaded lazily */

/* Fills s->lt_error and points the environment at it; returns nothing (the message is the result). */
static void lt_unavailable(struct tr_cuda_state *s, const char *what)
{
    snprintf(s->lt_error, sizeof s->lt_error,
             "cuBLASLt is needed for matrix products on cuda:%d but %s. Install the cuBLAS library this build "
             "was made for (" TR_CUBLASLT_SONAME ", in the CUDA toolkit's lib64 folder or pip's nvidia-cublas "
             "package) or add its folder to LD_LIBRARY_PATH; or run on device \"cpu\".",
             s->device, what);
    s->blas.unavailable = s->lt_error;
}

/* dlopen, dlsym every function of the table, create the handle on the state's device. */
static void lt_load(struct tr_cuda_state *s)
{
    char what[512];
    s->lt_tried = 1;
    void *lib = dlopen(TR_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char first[256];
        snprintf(first, sizeof first, "%s", dlerror());
        lib = dlopen(TR_CUBLASLT_SONAME_FALLBACK, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            snprintf(what, sizeof what, "it could not be loaded (%s; then %s)", first, dlerror());
            lt_unavailable(s, what);
            return;
        }
    }
    /* dlsym returns void *; POSIX guarantees it converts to a function pointer */
#define TR_LT_RESOLVE(name)                                                                                  if (!(*(void **)&s->api.name = dlsym(lib, #name))) {                                                          snprintf(what, sizeof what, "the loaded library lacks %s (an older cuBLAS than " TR_CUBLASLT_SONAME "'s?)", #name);         dlclose(lib);                                                                                            lt_unavailable(s, what);                                                                                 return;                                                                                              }
    TR_CUBLASLT_FUNCTIONS(TR_LT_RESOLVE)
#undef TR_LT_RESOLVE
    int prev;
    cublasStatus_t st = CUBLAS_STATUS_NOT_INITIALIZED;
    if (enter_device(s->device, &prev) == 0) {
        st = s->api.cublasLtCreate(&s->lt);
        leave_device(s->device, prev);
    } else {
        (void)cudaGetLastError();
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        s->lt = NULL;
        snprintf(what, sizeof what, "cublasLtCreate failed with %s", tr_cublas_status_name(st));
        dlclose(lib);
        lt_unavailable(s, what);
        return;
    }
    s->lt_lib = lib;
    s->blas.lt = s->lt;
    s->blas.api = &s->api;
}

void *tr_cuda_blas_env(void *state)
{
    struct tr_cuda_state *s = state;
    if (!s) return NULL;
    if (!s->lt_tried) lt_load(s);
    return &s->blas;
}

void *tr_cuda_index_error(void *state) { return state ? ((struct tr_cuda_state *)state)->index_error : NULL; }

int tr_cuda_state_device(void *state) { return state ? ((struct tr_cuda_state *)state)->device : -1; }

int tr_cuda_set_current(void *state, tr_error *err)
{
    TR_CUDA_CHECK(err, cudaSetDevice(((struct tr_cuda_state *)state)->device));
    return TR_OK;
}

int tr_cuda_synchronize(void *state, tr_error *err)
{
    TR_CUDA_CHECK(err, tr_sync_stream(((struct tr_cuda_state *)state)->stream));
    return TR_OK;
}

#endif
