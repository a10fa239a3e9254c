-- trainer.pretty: two printers for Lua values.
--   pretty.literal(v)  a deterministic Lua table literal (sorted keys, two-space indent):
--                      what `trainer check` prints and resolved_recipe.lua holds. Functions
--                      are shown as <function recipes/x.lua:12>.
--   pretty.show(v)     the REPL's auto-print: survives cycles (<cycle>), limits depth and
--                      items, and uses __tostring where a value has one (tensors).
local M = {}

local keywords = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do keywords[w] = true end

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil and not keywords[s]
end

-- Shortest decimal text that reads back as the same double.
function M.number(x)
  if x ~= x then return "0/0" end
  if x == math.huge then return "math.huge" end
  if x == -math.huge then return "-math.huge" end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return ("%d"):format(x) end
  for prec = 6, 17 do
    local s = ("%." .. prec .. "g"):format(x)
    if tonumber(s) == x then return s end
  end
  return ("%.17g"):format(x)
end

function M.func_name(f)
  local info = debug.getinfo(f, "S")
  if info.what == "C" then return "<function builtin>" end
  local src = info.source:gsub("^[@=]", "")
  return ("<function %s:%d>"):format(src, info.linedefined)
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return ("%q"):format(v):gsub("\\\n", "\\n") end
  if t == "number" then return M.number(v) end
  if t == "function" then return M.func_name(v) end
  if t == "nil" or t == "boolean" then return tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  return "<" .. t .. ">"
end
M.scalar = scalar

-- Array part length when the table is a proper sequence 1..n and has no other keys.
local function sequence_length(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  for i = 1, n do if t[i] == nil then return nil end end
  return n
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta == "number" end   -- numbers before strings
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end
M.sorted_keys = sorted_keys

local function key_text(k)
  if is_identifier(k) then return k end
  return "[" .. scalar(k) .. "]"
end

local function literal(v, indent, seen)
  if type(v) ~= "table" or (getmetatable(v) and getmetatable(v).__tostring) then
    return scalar(v)
  end
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local n = sequence_length(v)
  if n == 0 then seen[v] = nil; return "{}" end
  if n then
    local simple = true
    for i = 1, n do if type(v[i]) == "table" then simple = false break end end
    if simple then
      local parts = {}
      for i = 1, n do parts[i] = scalar(v[i]) end
      local s = "{ " .. table.concat(parts, ", ") .. " }"
      if #s + #indent < 100 then seen[v] = nil; return s end
    end
  end
  local inner = indent .. "  "
  local lines = { "{" }
  for _, k in ipairs(sorted_keys(v)) do
    local prefix = (n and type(k) == "number") and "" or (key_text(k) .. " = ")
    lines[#lines + 1] = inner .. prefix .. literal(v[k], inner, seen) .. ","
  end
  lines[#lines + 1] = indent .. "}"
  seen[v] = nil
  return table.concat(lines, "\n")
end

function M.literal(v)
  return literal(v, "", {})
end

-- REPL display. opts: depth (default 3), items (default 40 per table).
function M.show(v, opts)
  opts = opts or {}
  local max_depth, max_items = opts.depth or 3, opts.items or 40
  local seen = {}
  local function show(x, depth, indent)
    if type(x) ~= "table" then return scalar(x) end
    local mt = getmetatable(x)
    if mt and mt.__tostring then return tostring(x) end
    if seen[x] then return "<cycle>" end
    if depth >= max_depth then return "{...}" end
    seen[x] = true
    local keys = sorted_keys(x)
    if #keys == 0 then seen[x] = nil; return "{}" end
    local n = sequence_length(x)
    local parts, width = {}, 0
    for i, k in ipairs(keys) do
      if i > max_items then
        parts[#parts + 1] = ("... (%d more)"):format(#keys - max_items)
        break
      end
      local val = show(x[k], depth + 1, indent .. "  ")
      local item = (n and type(k) == "number") and val or (key_text(k) .. " = " .. val)
      parts[#parts + 1] = item
      width = width + #item + 2
    end
    seen[x] = nil
    if width < 72 and not table.concat(parts):find("\n") then
      return "{ " .. table.concat(parts, ", ") .. " }"
    end
    local inner = indent .. "  "
    return "{\n" .. inner .. table.concat(parts, ",\n" .. inner) .. "\n" .. indent .. "}"
  end
  return show(v, 0, "")
end

return M
