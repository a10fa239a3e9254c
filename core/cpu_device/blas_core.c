/* blas_core.c — re-selects OpenBLAS's kernel set by CPU features when its model-number
 * detection fell back (see blas_core.h for why). Process-wide library configuration, done
 * once under pthread_once before the first GEMM; no state of its own besides the once flag. */
#include "blas_core.h"

#include "isa_max.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

/* ------------------------------------------------------------ ranks */

/* OpenBLAS's kernel-set names (driver/others/dynamic.c) by the widest ISA they use. */
static const struct {
    const char *name;
    int rank;
} core_ranks[] = {
    { "Katmai", 0 },      { "Coppermine", 0 },  { "Northwood", 0 },  { "Prescott", 0 },
    { "Banias", 0 },      { "Atom", 0 },        { "Core2", 0 },      { "Penryn", 0 },
    { "Dunnington", 0 },  { "Nehalem", 0 },     { "Athlon", 0 },     { "Opteron", 0 },
    { "Opteron_SSE3", 0 }, { "Barcelona", 0 },  { "Nano", 0 },       { "Bobcat", 0 },
    { "Sandybridge", 1 }, { "Bulldozer", 1 },   { "Piledriver", 1 }, { "Steamroller", 1 },
    { "Excavator", 1 },   { "Haswell", 2 },     { "Zen", 2 },        { "SkylakeX", 3 },
    { "Cooperlake", 3 },  { "SapphireRapids", 3 },
};

int tr_blas_core_rank(const char *core)
{
    if (!core) return -1;
    for (size_t i = 0; i < sizeof core_ranks / sizeof core_ranks[0]; i++)
        if (strcasecmp(core, core_ranks[i].name) == 0) return core_ranks[i].rank;
    return -1;
}

int tr_blas_cpu_rank(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (TR_ISA_AVX512_ALLOWED && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return 3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
    if (__builtin_cpu_supports("avx")) return 1;
#endif
    return 0;
}

/* The kernel set for a rank, as OPENBLAS_CORETYPE spells it. */
static const char *core_for_rank(int rank)
{
    switch (rank) {
    case 3: return "SkylakeX";
    case 2: return "Haswell";
    case 1: return "Sandybridge";
    default: return NULL;
    }
}

/* ------------------------------------------------------------ setup */

typedef char *(*corename_fn)(void);
typedef void (*dynamic_fn)(void);

const char *tr_blas_core_name(void)
{
    corename_fn name = (corename_fn)dlsym(RTLD_DEFAULT, "openblas_get_corename");
    const char *core = name ? name() : NULL;
    return core ? core : "unknown";
}

static void setup_once(void)
{
    if (getenv("OPENBLAS_CORETYPE")) return;   /* the user chose */
    corename_fn name = (corename_fn)dlsym(RTLD_DEFAULT, "openblas_get_corename");
    dynamic_fn quit = (dynamic_fn)dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    dynamic_fn init = (dynamic_fn)dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (!name || !quit || !init) return;       /* not a DYNAMIC_ARCH OpenBLAS */
    int have = tr_blas_core_rank(name()), cpu = tr_blas_cpu_rank();
    const char *want = core_for_rank(cpu);
    /* unknown name, or already the best (above the CPU's rank only in an ISA_MAX build) */
    if (have < 0 || have == cpu || (have > cpu && TR_ISA_AVX512_ALLOWED) || !want) return;
    /* gotoblas_dynamic_init reads OPENBLAS_CORETYPE; the variable is removed again so that
     * the environment a recipe's child processes see is the user's. setenv can fail only
     * for lack of memory, and then OpenBLAS keeps its own choice. */
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
    quit();
    init();
    unsetenv("OPENBLAS_CORETYPE");
}

void tr_blas_core_setup(void)
{
    /* The one static of the runtime: OpenBLAS's kernel choice is process-wide, so is its fix. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (pthread_once(&once, setup_once) != 0) return;   /* only for bad arguments */
}
