/* main.c — the `trainer` binary: starts LuaJIT, points package.path at the Lua tree that
 * belongs to this binary, and hands the command line to trainer.cli.main, whose return
 * value is the exit status.
 *
 * The Lua tree is found relative to the binary's own path, so the binary runs from any
 * working directory: <dir>/lua (a build tree) or <dir>/../share/trainer/lua (an
 * installation). TRAINER_ROOT overrides both.
 *
 * libgomp reads its wait policy from the environment once, when it is loaded, before
 * main runs; so the binary sets it and re-executes itself once (see spin_less_openmp). */
#include "lua_native.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int file_exists(const char *path) { return access(path, R_OK) == 0; }

/* libgomp's default lets an idle thread spin for about 300000 pause loops at every barrier
 * before it sleeps. A training step is hundreds of short parallel regions (every kernel,
 * every OpenBLAS GEMM), so on a busy 2-core machine the spinning took a quarter of the
 * step's CPU time (perf: two libgomp addresses and sched_yield), time the working thread
 * and the neighbours' processes lacked. GOMP_SPINCOUNT=10000 keeps the fast hand-over
 * between back-to-back regions and sleeps after well under a millisecond. A user's
 * own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept as it is, and so is this process when the
 * re-exec fails (it then runs with libgomp's default). Set either variable to profile the
 * binary under a tool that does not follow exec. */
static void spin_less_openmp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    /* Under valgrind (its preload library is in LD_PRELOAD) the re-exec would leave the
     * tool, which follows exec only with --trace-children=yes: stay, with the default. */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT");   /* execv returned: it failed; run on as we are */
}

/* Fills root with the folder that holds lua/trainer/cli/init.lua; 0 on success. */
static int find_root(char *root, size_t len)
{
    const char *env = getenv("TRAINER_ROOT");
    char probe[PATH_MAX + 64];
    if (env && *env) {
        snprintf(root, len, "%s", env);
        return 0;
    }
    char exe[PATH_MAX / 2]; /* half, so that exe + a suffix always fits in root */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    snprintf(probe, sizeof probe, "%s/lua/trainer/cli/init.lua", exe);
    if (file_exists(probe)) {
        snprintf(root, len, "%s", exe);
        return 0;
    }
    snprintf(probe, sizeof probe, "%s/../share/trainer/lua/trainer/cli/init.lua", exe);
    if (file_exists(probe)) {
        snprintf(root, len, "%s/../share/trainer", exe);
        char real[PATH_MAX];
        if (realpath(root, real)) snprintf(root, len, "%s", real);
        return 0;
    }
    return -1;
}

/* Runs trainer.cli.main(args) under a traceback handler; returns the exit status. */
static int run_cli(lua_State *L, int argc, char **argv)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "trainer.cli");
    if (lua_pcall(L, 1, 1, 0) != 0) {
        fprintf(stderr, "trainer: cannot load the Lua layer: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_getfield(L, -1, "main");
    lua_newtable(L);
    for (int i = 1; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    if (lua_pcall(L, 1, 1, 0) != 0) {
        /* cli.main catches everything it can explain; this is the last net. */
        const char *msg = lua_tostring(L, -1);
        fprintf(stderr, "trainer: internal error: %s\n", msg ? msg : "(error object is not a string)");
        return 1;
    }
    int status = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : 0;
    return status;
}

int main(int argc, char **argv)
{
    spin_less_openmp(argv);
    char root[PATH_MAX];
    if (find_root(root, sizeof root) != 0) {
        fprintf(stderr,
                "trainer: cannot find the Lua tree (lua/trainer/cli/init.lua) next to the binary or in "
                "../share/trainer; set TRAINER_ROOT to the folder that holds lua/ and recipes/.\n");
        return 1;
    }
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "trainer: cannot create the Lua state (out of memory)\n");
        return 2;
    }
    luaL_openlibs(L);
    tr_lua_use_root(L, root, NULL);
    int status = run_cli(L, argc, argv);
    lua_close(L);
    return status;
}
