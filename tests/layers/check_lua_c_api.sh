#!/usr/bin/env bash
# Fails when the Lua C API (lua_*, luaL_*, luaJIT_*, lua_State, or an include of lua.h,
# lauxlib.h, lualib.h, luajit.h) appears in core/ or kernels/ outside the files that need a
# lua_State (docs/ARCHITECTURE.md, "Layers": the FFI over core/trainer.h is the one way from
# Lua to C; the C-API module keeps only what cannot be a plain C function). Each such line is
# printed. Also fails when a file of the list no longer uses the C API (the list must shrink
# with the code).
#   tests/layers/check_lua_c_api.sh [ROOT]   (default: the repository)
# Prints PASS/FAIL lines for tests/run.sh.
set -u
cd "${1:-$(dirname "$0")/../..}"
name=lua_c_api.only_where_a_lua_state_is_needed
# The files that need a lua_State, and why:
#   core/main.c                 the host: makes the Lua state, sets package.path, runs trainer.cli
#   core/binding/lua_native.[ch] the module trainer.native: the Ctrl-C hook armed in the running
#                               state, the line editor's Lua completer, the root in the registry
#   core/binding/lua_json.[ch]  JSON decoded into Lua tables and encoded from them
allowed=" core/main.c core/binding/lua_native.c core/binding/lua_native.h core/binding/lua_json.c core/binding/lua_json.h "
pattern='\<(lua|luaL|luaJIT)_[A-Za-z_]+|\<lua_State\>|#[[:space:]]*include[[:space:]]*[<"](lua|lauxlib|lualib|luajit)\.h[>"]'
files=$(find core kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
if [ -z "$files" ]; then
  echo "FAIL $name: no C source under core/ or kernels/ (is this the repository root?)"
  exit 1
fi
bad="" stale=""
for f in $files; do
  case "$allowed" in
    *" $f "*) grep -qE "$pattern" "$f" || stale="$stale $f" ;;
    *) hits=$(grep -nE "$pattern" "$f" | head -5)
       [ -n "$hits" ] && bad="$bad$(printf '%s\n' "$hits" | sed "s|^|  $f:|")"$'\n' ;;
  esac
done
for f in $allowed; do [ -e "$f" ] || stale="$stale $f"; done
if [ -n "$bad" ]; then
  echo "FAIL $name: the Lua C API is used outside the files that need a lua_State; make it a plain C"
  echo "  function declared in a header of core/trainer.h and call it through the FFI:"
  printf '%s' "$bad"
  exit 1
fi
if [ -n "$stale" ]; then
  echo "FAIL $name: listed as needing a lua_State but using no Lua C API (or missing):$stale;"
  echo "  take them off the list in $0"
  exit 1
fi
echo "PASS $name"
