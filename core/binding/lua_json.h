/* lua_json.h — JSON functions of the `trainer.native` module (see lua_json.c). */
#ifndef TR_LUA_JSON_H
#define TR_LUA_JSON_H
#include <lua.h>
/* Adds json_decode, json_encode and json_null to the table on top of the stack. */
void tr_lua_json_register(lua_State *L);
#endif
