-- trainer.cli.pretty: two printers for Lua values.
--   pretty.literal(v)  a deterministic Lua table literal (sorted keys, two-space indent):
--                      what `trainer check` prints and resolved_recipe.lua holds. Functions
--                      are shown as <function recipes/x.lua:12>.
--   pretty.show(v)     the REPL's auto-print: survives cycles (<cycle>), limits depth and
--                      items, and uses __tostring where a value has one (tensors).
--   pretty.module(m)   an nn module as a summary, the way PyTorch prints a module: class,
--                      parameter counts, the tree of submodules (leaves with their
--                      parameters' shapes; repeated layers once, as "12 x Layer"). What
--                      tostring(module) and the REPL show.
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
M.sequence_length = sequence_length

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

-- ---------------------------------------------------------------- modules
-- 22713216 -> "22,713,216"
local function grouped(n)
  local s = ("%d"):format(n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

-- 22713216 -> "22.7 M", 4208 -> "4.2 K", 32 -> "32"
local function short_count(n)
  if n >= 1e9 then return ("%.1f G"):format(n / 1e9) end
  if n >= 1e6 then return ("%.1f M"):format(n / 1e6) end
  if n >= 1e4 then return ("%.1f K"):format(n / 1e3) end
  return grouped(n)
end

-- A parameter's tensor facts, nil for a freed one (a summary must never raise).
local function param_info(p)
  local v = p.value
  if type(v) ~= "table" or (v.is_freed and v:is_freed()) then return nil end
  local ok, shape, numel, dtype, device = pcall(function() return v:shape(), v:numel(), v:dtype(), v:device() end)
  if not ok then return nil end
  return { shape = shape, numel = numel, dtype = dtype, device = device }
end

local function counts(m)
  local total, trainable = 0, 0
  for _, entry in ipairs(m:parameter_list()) do
    local info = param_info(entry[2])
    if info then
      total = total + info.numel
      if entry[2].trainable then trainable = trainable + info.numel end
    end
  end
  return total, trainable
end

local function count_text(total, trainable)
  if total == 0 then return "" end
  if trainable == total then return short_count(total) end
  if trainable == 0 then return short_count(total) .. " frozen" end
  return ("%s (%s trainable)"):format(short_count(total), short_count(trainable))
end

-- Own parameters as "weight [116, 32], bias [32]"; frozen ones say so.
local function params_text(m)
  local parts = {}
  for _, entry in ipairs(m._params) do
    local info = param_info(entry[2])
    local shape = info and ("[" .. table.concat(info.shape, ", ") .. "]") or "(freed)"
    parts[#parts + 1] = entry[1] .. " " .. shape .. (entry[2].trainable and "" or " frozen")
  end
  return table.concat(parts, ", ")
end

-- A child's display name: its state-dict name, or for a transparent child the field it
-- is reachable as.
local function child_name(entry)
  if entry[1] ~= "" then return entry[1] end
  return entry[3] or "-"
end

-- What makes two modules print alike: class, parameters and children, recursively.
local function signature(m)
  local parts = { m.__name or "?" }
  for _, entry in ipairs(m._params) do
    local info = param_info(entry[2])
    parts[#parts + 1] = entry[1] .. (info and table.concat(info.shape, "x") or "-") .. tostring(entry[2].trainable)
  end
  for _, entry in ipairs(m._children) do
    parts[#parts + 1] = child_name(entry) .. "=" .. signature(entry[2])
  end
  return table.concat(parts, ";")
end

-- Children in order, runs of alike ones named stem.N, stem.N+1, ... grouped:
-- list of { name, module, repeat_count }.
local function grouped_children(m)
  local groups = {}
  for _, entry in ipairs(m._children) do
    local name, child = child_name(entry), entry[2]
    local stem, index = name:match("^(.-)(%d+)$")
    local last = groups[#groups]
    if last and stem and last.stem == stem and tonumber(index) == last.last + 1
      and signature(child) == last.signature then
      last.count, last.last = last.count + 1, last.last + 1
    else
      groups[#groups + 1] = { name = name, module = child, count = 1, stem = stem,
        first = tonumber(index), last = tonumber(index), signature = stem and signature(child) }
    end
  end
  return groups
end

-- Settings worth a glance, PyTorch's extra_repr: a class's own m:extra_repr() if it has
-- one, else the usual scalar fields (dropout p, pooling mode, LoRA r and alpha, eps).
local setting_fields = { "mode", "p", "r", "alpha", "eps" }
local function settings_text(m)
  if type(m.extra_repr) == "function" then
    local ok, s = pcall(m.extra_repr, m)
    if ok and type(s) == "string" then return s end
  end
  local parts = {}
  for _, f in ipairs(setting_fields) do
    local v = rawget(m, f)
    if type(v) == "number" then parts[#parts + 1] = f .. "=" .. M.number(v)
    elseif type(v) == "string" then parts[#parts + 1] = f .. "=" .. v end
  end
  return table.concat(parts, ", ")
end

local function module_lines(m, indent, lines, depth)
  for _, g in ipairs(grouped_children(m)) do
    local child = g.module
    local name, what = g.name, child.__name or "?"
    if g.count > 1 then
      name = ("%s%d-%d"):format(g.stem, g.first, g.last)
      what = ("%d x %s"):format(g.count, what)
    end
    local settings = settings_text(child)
    if settings ~= "" then what = what .. "(" .. settings .. ")" end
    local detail
    if #child._children == 0 then
      detail = params_text(child)
    else
      local total, trainable = counts(child)
      detail = count_text(total, trainable)
      if g.count > 1 and detail ~= "" then detail = detail .. " each" end
      if #child._params > 0 then detail = detail .. "; own " .. params_text(child) end
    end
    lines[#lines + 1] = ("%s(%s) %s%s"):format(indent, name, what, detail ~= "" and (": " .. detail) or "")
    if depth < 12 then module_lines(child, indent .. "  ", lines, depth + 1) end
  end
end

function M.module(m)
  local total, trainable = counts(m)
  local dtypes, devices, seen = {}, {}, {}
  for _, entry in ipairs(m:parameter_list()) do
    local info = param_info(entry[2])
    if info then
      if not seen[info.dtype] then seen[info.dtype] = true; dtypes[#dtypes + 1] = info.dtype end
      if not seen["@" .. info.device] then seen["@" .. info.device] = true; devices[#devices + 1] = info.device end
    end
  end
  local settings = settings_text(m)
  local head = ("%s%s: %s parameters"):format(m.__name or "Module",
    settings ~= "" and ("(" .. settings .. ")") or "", grouped(total))
  if total >= 1e4 then head = head .. " (" .. short_count(total) .. ")" end
  if trainable == total then
    head = head .. (total > 0 and ", all trainable" or "")
  else
    head = head .. (", %s trainable"):format(grouped(trainable))
  end
  if #dtypes > 0 then head = head .. ", " .. table.concat(dtypes, "/") .. " on " .. table.concat(devices, ", ") end
  head = head .. (m.training and ", train mode" or ", eval mode")
  local lines = { head }
  if #m._children == 0 and #m._params > 0 then lines[#lines + 1] = "  " .. params_text(m) end
  module_lines(m, "  ", lines, 1)
  return table.concat(lines, "\n")
end

return M
