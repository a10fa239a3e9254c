/* fuzz_json.c — libFuzzer target: any bytes through the JSON binding that Lua uses for
 * config.json, tokenizer_config.json, adapter_config.json and metrics (core/binding/
 * lua_json.c). json_decode returns a value or nil and a message, never raises; a decoded
 * value that encodes must decode again to a value that encodes to the same text (false and
 * null decode to Lua values that are not truthy: only nil means "did not decode"). */
#include "fuzz.h"
#include "lua_json.h"

#include <lauxlib.h>
#include <lualib.h>

static lua_State *L;

static void setup(void)
{
    L = luaL_newstate();
    if (!L) FUZZ_FAIL("no Lua state");
    luaL_openlibs(L);
    lua_newtable(L);
    tr_lua_json_register(L);
    lua_setglobal(L, "native");
    /* round trip: encode(decode(text)) is a fixed point after one step */
    const char *check =
        "local text = ...\n"
        "local v, why = native.json_decode(text, 'config.json')\n"
        "if v == nil then assert(type(why) == 'string' and why:find('^config.json: '), 'no message') return end\n"
        "local a = native.json_encode(v)\n"
        "if a == nil then return end\n"
        "local w, why2 = native.json_decode(a)\n"
        "if w == nil then error('its own encoding does not decode: ' .. a .. ': ' .. tostring(why2)) end\n"
        "local b = native.json_encode(w)\n"
        "assert(a == b, 'round trip changed: ' .. a .. ' -> ' .. tostring(b))\n"
        "native.json_encode(v, 2)\n";
    if (luaL_loadstring(L, check) != 0) FUZZ_FAIL("%s", lua_tostring(L, -1));
    lua_setglobal(L, "check");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!L) setup();
    int top = lua_gettop(L);
    lua_getglobal(L, "check");
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != 0) {
        const char *msg = lua_tostring(L, -1);
        /* LuaJIT's own limits are errors, not crashes */
        if (msg && (strstr(msg, "not enough memory") || strstr(msg, "stack overflow"))) {
            lua_settop(L, top);
            return 0;
        }
        FUZZ_FAIL("%s", msg ? msg : "(no message)");
    }
    lua_settop(L, top);
    lua_gc(L, LUA_GCCOLLECT, 0);
    return 0;
}
