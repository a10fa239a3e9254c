-- luacheck settings for `make lint`: LuaJIT, the one global `trainer` (no other global:
-- docs/CONTRACT.md, "The Lua API"), long lines allowed (messages are written as one string).
std = "luajit"
globals = { "trainer" }
max_line_length = false
-- Recipes run in their own environment, where `trainer` is given.
files["recipes/"] = { read_globals = { "trainer" } }
-- Methods and callbacks keep their full signatures even when a body ignores an argument.
unused_args = false
-- `not (x > y)` is how the code says "also when x is NaN": keep it.
ignore = { "581" }
