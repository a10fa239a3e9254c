/* lua_native.h — the C functions the Lua layer needs that the FFI cannot give safely:
 * line editing (libedit), signal-aware protected calls, terminal checks. Registered as
 * the module `trainer.native` by main.c. Not part of the FFI header on purpose. */
#ifndef TR_LUA_NATIVE_H
#define TR_LUA_NATIVE_H
#include <lua.h>
int tr_lua_open_native(lua_State *L);
#endif
