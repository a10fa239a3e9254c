-- trainer.recipe.diff: the keys where two resolved recipes differ, one line each,
--   key.path: A-VALUE -> B-VALUE
-- sorted by key path. Tables that are not lists are walked key by key, so a difference
-- names the innermost key; lists and other values compare whole. A key one side lacks
-- shows as `unset`. Functions compare by where they were defined (the same hook inherited
-- from one parent is the same). Values print as `trainer check` prints them, on one line.
-- `trainer check --diff` and `trainer resume`'s refusal of a changed recipe both print it.
local pretty = require("trainer.cli.pretty")

local M = {}

local function is_list(t)
  return type(t) == "table" and t[1] ~= nil
end

-- One value on one line, as `trainer check` shows it.
function M.show(v)
  if v == nil then return "unset" end
  local text = pretty.literal(v)
  if not text:find("\n", 1, true) then return text end
  return (text:gsub(",\n%s*}", " }"):gsub("%s*\n%s*", " "))
end

local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == "function" then return pretty.func_name(a) == pretty.func_name(b) end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function key_order(x, y)
  if type(x) ~= type(y) then return type(x) == "number" end
  if type(x) == "number" or type(x) == "string" then return x < y end
  return tostring(x) < tostring(y)
end

-- Appends to out a { key, a, b } entry for each key path where tables a and b differ.
local function walk(a, b, prefix, out)
  local keys = {}
  for k in pairs(a) do keys[#keys + 1] = k end
  for k in pairs(b) do if a[k] == nil then keys[#keys + 1] = k end end
  table.sort(keys, key_order)
  for _, k in ipairs(keys) do
    local x, y = a[k], b[k]
    local name = prefix == "" and tostring(k) or (prefix .. "." .. tostring(k))
    if type(x) == "table" and type(y) == "table" and not is_list(x) and not is_list(y) then
      walk(x, y, name, out)
    elseif not same(x, y) then
      out[#out + 1] = { key = name, a = x, b = y }
    end
  end
  return out
end

-- The differences of tables a and b: { { key, a, b }, ... }, sorted by key path.
function M.entries(a, b)
  return walk(a, b, "", {})
end

-- The same as lines "key: A -> B".
function M.lines(a, b)
  local out = {}
  for i, e in ipairs(M.entries(a, b)) do
    out[i] = ("%s: %s -> %s"):format(e.key, M.show(e.a), M.show(e.b))
  end
  return out
end

return M
