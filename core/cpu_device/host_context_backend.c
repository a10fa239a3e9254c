/* host_context_backend.c — the host backend as the context sees it (core/ctx/backend.h): OpenBLAS
 * set to the kernels this CPU can run before a context's first op (blas_core.h), and the
 * CPU GEMM router (cpu_gemm.h) as the backend's private state in each context, made on the
 * first product and freed with the context. The host's allocator is the context's own and
 * host bytes are moved by core/tensor/ itself, so the backend has neither. Registered before
 * main by a constructor, so that the context reaches the router without including it. This
 * file calls cpu_gemm.c, never the other way: cpu_gemm.c finds its router through the
 * registry (tr_ctx_cpu_gemm). */
#include "backend.h"
#include "blas_core.h"
#include "cpu_gemm.h"

static int router_new(void **out, tr_error *err)
{
    tr_cpu_gemm *g = NULL;
    int rc = tr_cpu_gemm_create(&g, err);
    *out = g;
    return rc;
}

static void router_free(void *g) { tr_cpu_gemm_free(g); }

static const tr_backend cpu_backend = {
    .name = "cpu",
    .kind = TR_BACKEND_HOST,
    .setup = tr_blas_core_setup,
    .private_new = router_new,
    .private_free = router_free,
};

__attribute__((constructor)) static void register_cpu_backend(void) { tr_backend_register(&cpu_backend); }
