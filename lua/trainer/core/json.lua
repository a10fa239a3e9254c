-- trainer.core.json: JSON through jansson (core/binding/lua_json.c).
--   json.decode(text [, source]) -> value, or raises a user error naming source
--   json.encode(value [, indent]) -> text (sorted keys: deterministic files)
--   json.read(path) -> value; json.null stands for JSON null
local native = require("trainer.native")
local errors = require("trainer.core.errors")

local M = { null = native.json_null }

function M.decode(text, source)
  local v, err = native.json_decode(text, source)
  if err then errors.user("%s", err) end
  return v
end

function M.encode(value, indent)
  local s, err = native.json_encode(value, indent)
  if not s then errors.user("%s", err) end
  return s
end

function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then errors.user("%s: cannot read (%s)", path, err) end
  local text = f:read("*a")
  f:close()
  return M.decode(text, path)
end

return M
