/* lua_native.h — the Lua C-API module `trainer.native`: what needs a lua_State (the
 * Ctrl-C-interruptible call, the REPL's line editor, the root folder, the JSON binding).
 * Registered by main.c. Not part of the FFI header on purpose: every other C function the
 * Lua layer calls is in core/trainer.h. */
#ifndef TR_LUA_NATIVE_H
#define TR_LUA_NATIVE_H
#include <lua.h>
int tr_lua_open_native(lua_State *L);
/* Points L at the tree under root (the folder that holds lua/, recipes/ and core/, headers for
 * the FFI): package.path on root/lua, then extra_path (a ";"-separated list, or NULL), no C
 * modules from package.cpath, trainer.native preloaded, and root in the registry for
 * native.root(). As main.c runs trainer, and as the fuzz harnesses run its Lua parsers. */
void tr_lua_use_root(lua_State *L, const char *root, const char *extra_path);
#endif
