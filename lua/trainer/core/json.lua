-- trainer.core.json: JSON through jansson (core/binding/lua_json.c).
--   json.decode(text [, source]) -> value, or raises a user error naming source
--   json.encode(value [, indent]) -> text (sorted keys: deterministic files)
--   json.read(path) -> value; json.null stands for JSON null
local native = require("trainer.native")
local errors = require("trainer.core.errors")
local fs = require("trainer.core.fs")

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
  return M.decode(fs.must_read(path), path)
end

return M
