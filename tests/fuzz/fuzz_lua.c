/* fuzz_lua.c — libFuzzer targets for parsers written in Lua, built once per target with
 * -DFUZZ_LUA_TARGET="NAME": the Lua state is set up as core/main.c sets up trainer's
 * (package.path on lua/, trainer.native, the root), and tests/fuzz/lua_targets.lua's
 * function NAME gets each input as a string. A user error (trainer.core.errors) is the
 * parser refusing the input, as it should; any other Lua error is a broken contract and
 * aborts. libFuzzer is guided by the coverage of the C the Lua calls through the FFI
 * (CRC-32C, safetensors, JSON: instrumented) and by the Lua's own lines (a line hook, below).
 * Targets: tfrecord (event files: a resume's cut-back reads them), trainer_state (a
 * checkpoint's gzip'd safetensors + JSON state), beir (an IR evaluation set's three files),
 * model_config (a config.json checked by its model family). trainer_state and model_config
 * link the whole runtime, which the safetensors reader's tensors and the family modules load. */
#include "fuzz.h"
#include "lua_native.h"

#include <lauxlib.h>
#include <luajit.h>
#include <lualib.h>
#include <sanitizer/lsan_interface.h>

#ifndef FUZZ_LUA_TARGET
#define FUZZ_LUA_TARGET "tfrecord"
#endif

static lua_State *L;

/* The Lua's own coverage, for libFuzzer to be guided by the parser's branches as well as by
 * the C it calls: a line hook counts each pair (previous line, line) of every chunk (an edge,
 * hashed as AFL does) in libFuzzer's extra counters, which it clears before each input and
 * reads as features after. The JIT is off (hooks do not run in compiled traces): the targets'
 * inputs are small, the interpreter is fast enough. */
#define FUZZ_LUA_EDGES 65536
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t lua_edges[FUZZ_LUA_EDGES];
static uint32_t lua_prev_loc;

static void line_hook(lua_State *Ls, lua_Debug *ar)
{
    if (!lua_getinfo(Ls, "S", ar)) return;
    /* the chunk's name is an interned string: its address names the chunk for the run */
    uint32_t loc = (uint32_t)(((uintptr_t)ar->source >> 3) * 2654435761u) ^ ((uint32_t)ar->currentline * 40503u);
    uint8_t *c = &lua_edges[(loc ^ lua_prev_loc) % FUZZ_LUA_EDGES];
    if (*c < 255) (*c)++;
    lua_prev_loc = loc >> 1;
}

static void setup(void)
{
    const char *root = getenv("FUZZ_ROOT");
    char cwd[1024];
    if (!root) root = getcwd(cwd, sizeof cwd);
    L = luaL_newstate();
    if (!L) FUZZ_FAIL("no Lua state");
    luaL_openlibs(L);
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_pushfstring(L, "%s/tests/fuzz/?.lua", root); /* lua_targets.lua */
    tr_lua_use_root(L, root, lua_tostring(L, -1));
    lua_pop(L, 1);
    /* check(data): runs the target; true, or false and the message of a broken contract.
     * The target's modules load first (lua_targets.prepare[NAME]): what they allocate for the
     * process's life (trainer_state, model_config: the runtime's context) is held from LuaJIT's heap, which
     * LeakSanitizer does not scan, so setup runs with leak detection off. */
    const char *driver =
        "local targets = require('lua_targets')\n"
        "local target = targets[...]\n"
        "local errors = require('trainer.core.errors')\n"
        "if targets.prepare[...] then targets.prepare[...]() end\n"
        "return function(data, tmp)\n"
        "  local ok, e = xpcall(target, debug.traceback, data, tmp)\n"
        "  if ok or errors.is_user_error(e) then return true end\n"
        "  return false, tostring(e)\n"
        "end\n";
    if (luaL_loadstring(L, driver) != 0) FUZZ_FAIL("%s", lua_tostring(L, -1));
    lua_pushstring(L, FUZZ_LUA_TARGET);
    if (lua_pcall(L, 1, 1, 0) != 0) FUZZ_FAIL("setting up %s: %s", FUZZ_LUA_TARGET, lua_tostring(L, -1));
    lua_setglobal(L, "check");
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    __lsan_disable();
    setup();
    __lsan_enable();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lua_prev_loc = 0;
    lua_getglobal(L, "check");
    lua_pushlstring(L, (const char *)data, size);
    lua_pushstring(L, fuzz_dir());
    if (lua_pcall(L, 2, 2, 0) != 0) FUZZ_FAIL("%s", lua_tostring(L, -1));
    if (!lua_toboolean(L, -2)) {
        const char *msg = lua_tostring(L, -1);
        if (!(msg && (strstr(msg, "not enough memory") || strstr(msg, "stack overflow"))))
            FUZZ_FAIL("%s: %s", FUZZ_LUA_TARGET, msg ? msg : "(no message)");
    }
    lua_pop(L, 2);
    lua_gc(L, LUA_GCCOLLECT, 0);
    return 0;
}
