/* lua_native.h — the Lua C-API module `trainer.native`: what needs a lua_State (the
 * Ctrl-C-interruptible call, the REPL's line editor, the root folder, the JSON binding).
 * Registered by main.c. Not part of the FFI header on purpose: every other C function the
 * Lua layer calls is in core/trainer.h. */
#ifndef TR_LUA_NATIVE_H
#define TR_LUA_NATIVE_H
#include <lua.h>
int tr_lua_open_native(lua_State *L);
#endif
