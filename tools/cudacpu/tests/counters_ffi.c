/* counters_ffi.c (cudacpu tests) — the counters read from Lua as the project reads them: the
 * counters' part of cuda_runtime.h (from `struct cudacpu_counters` to cudacpu_launch_log_get)
 * fed to LuaJIT's ffi.cdef, the functions found in this binary (linked with --export-dynamic),
 * the struct's size the same as C's, and counts that match the calls made from C.
 * Usage: counters_ffi PATH/TO/cuda_runtime.h */
#include <cuda_runtime.h>

#include <lauxlib.h>
#include <lualib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_decls(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    static char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    if (ferror(f) || fclose(f)) {
        perror(path);
        return NULL;
    }
    buf[n] = 0;
    char *a = strstr(buf, "struct cudacpu_counters {");
    const char *end = "int cudacpu_launch_log_get(int i, struct cudacpu_launch *out);";
    char *b = a ? strstr(a, end) : NULL;
    if (!b) return NULL;
    b[strlen(end)] = 0;
    return a;
}

int main(int argc, char **argv)
{
    char *decls = argc == 2 ? read_decls(argv[1]) : NULL;
    if (!decls) {
        printf("why: no counters' declarations in %s\n", argc == 2 ? argv[1] : "(no path given)");
        return 1;
    }
    cudacpu_counts_reset();
    void *p[3];
    for (int i = 0; i < 3; i++)
        if (cudaMalloc(&p[i], 64) != cudaSuccess) return printf("why: cudaMalloc failed\n"), 1;
    if (cudaFree(p[0]) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return printf("why: calls failed\n"), 1;
    lua_State *L = luaL_newstate();
    if (!L) return printf("why: no Lua state\n"), 1;
    luaL_openlibs(L);
    lua_pushstring(L, decls);
    lua_setglobal(L, "decls");
    lua_pushinteger(L, (lua_Integer)sizeof(struct cudacpu_counters));
    lua_setglobal(L, "c_size");
    static const char chunk[] =
        "local ffi = require('ffi')\n"
        "ffi.cdef(decls)\n"
        "assert(ffi.sizeof('struct cudacpu_counters') == c_size, 'struct size differs from C')\n"
        "local c = ffi.new('struct cudacpu_counters')\n"
        "ffi.C.cudacpu_counts(c)\n"
        "assert(c.mallocs == 3, 'mallocs ' .. tostring(c.mallocs))\n"
        "assert(c.frees == 1, 'frees ' .. tostring(c.frees))\n"
        "assert(c.device_syncs == 1, 'device_syncs ' .. tostring(c.device_syncs))\n"
        "ffi.C.cudacpu_counts_reset()\n"
        "ffi.C.cudacpu_counts(c)\n"
        "assert(c.mallocs == 0, 'not reset')\n";
    if (luaL_dostring(L, chunk)) {
        printf("why: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    return 0;
}
