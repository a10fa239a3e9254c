-- trainer.recipe.schema: a small language for describing Lua tables, and the checker that
-- validates a value against a description, collecting every error in one pass.
--
-- A spec is a table with `kind` and, for every kind, `doc` (one line) and optionally
-- `default`. Kinds:
--   string  { enum = {...}, pattern = "lua pattern" or patterns = { "p1", "p2" } (any one
--             matches), pattern_doc = "...", hint = function(v) -> " (...)" (added to the
--             error when v matches no pattern), path = true }
--   number  { min =, max =, gt = (exclusive minimum), lt =, integer = true }
--   boolean, func, any
--   size    bytes: a number, or a string such as "8GiB", "512MiB", "1.5GB"
--   list    { of = spec, min_items =, max_items = }
--   record  { fields = { name = spec, ... }, order = { names in display order },
--             check = function(value, report) (cross-field rules) }
--   map     { of = spec } (any string keys)
--   oneof   { alternatives = { spec, ... } } — the first that accepts the value wins;
--             narrow = true: a number that fits none is reported as the number alternative's
--   const   { value = v } (e.g. false to switch a feature off)
-- Path specs (`path = true`) make the checker warn, not fail, when the file is missing.
-- Any spec may carry `aliases = { "learning_rate", ... }`: names people write for it
-- (another library's), suggested when a recipe uses one.
local suggest = require("trainer.recipe.suggest")
local pretty = require("trainer.cli.pretty")

local M = {}

-- ---------------------------------------------------------------- constructors
local function mk(kind)
  return function(t)
    t = t or {}
    t.kind = kind
    return t
  end
end
M.string, M.number, M.boolean, M.func, M.any, M.size =
  mk("string"), mk("number"), mk("boolean"), mk("func"), mk("any"), mk("size")
M.record, M.map, M.list, M.oneof, M.const = mk("record"), mk("map"), mk("list"), mk("oneof"), mk("const")

function M.integer(t)
  t = t or {}
  t.integer = true
  return M.number(t)
end

-- ---------------------------------------------------------------- sizes
local units = {
  b = 1, kb = 1e3, mb = 1e6, gb = 1e9, tb = 1e12,
  kib = 2 ^ 10, mib = 2 ^ 20, gib = 2 ^ 30, tib = 2 ^ 40, k = 2 ^ 10, m = 2 ^ 20, g = 2 ^ 30,
}

-- Bytes from a number or a text like "8GiB"; nil and a reason when it cannot be read.
function M.parse_size(v)
  if type(v) == "number" then
    if v >= 0 and v == math.floor(v) then return v end
    return nil, "a size must be a whole, non-negative number of bytes"
  end
  if type(v) ~= "string" then return nil, "a size is a number of bytes or a text like \"8GiB\"" end
  local num, unit = v:match("^%s*([%d%.]+)%s*(%a*)%s*$")
  num = tonumber(num)
  local mult = units[(unit or ""):lower()]
  if unit == "" then mult = 1 end
  if not num or not mult then
    return nil, "a size is a number of bytes or a text like \"8GiB\", \"512MiB\", \"1.5GB\""
  end
  return math.floor(num * mult)
end

function M.format_size(bytes)
  local abs = math.abs(bytes)
  if abs >= 2 ^ 30 then return ("%.2f GiB"):format(bytes / 2 ^ 30) end
  if abs >= 2 ^ 20 then return ("%.2f MiB"):format(bytes / 2 ^ 20) end
  if abs >= 2 ^ 10 then return ("%.2f KiB"):format(bytes / 2 ^ 10) end
  return ("%d B"):format(bytes)
end

-- ---------------------------------------------------------------- descriptions
local function quote_list(list)
  local parts = {}
  for i, v in ipairs(list) do parts[i] = ("%q"):format(v) end
  if #parts == 1 then return parts[1] end
  return table.concat(parts, ", ", 1, #parts - 1) .. " or " .. parts[#parts]
end

local function number_text(x)
  return pretty.number(x)
end

-- The plural of a description, for lists and maps: "a number >= 0" -> "numbers >= 0",
-- "one of "a" or "b"" -> "values among "a" or "b"", "a number, or a string" -> "numbers or
-- strings". The noun is pluralised, not the end of the phrase (not "number >= 0s").
local NOUNS = { "integer", "number", "string", "path", "function", "table", "size", "value", "id" }
local function plural(text)
  if text:match("^one of ") then return (text:gsub("^one of ", "values among ")) end
  if text == "true or false" then return "booleans (true or false)" end
  local parts = {}
  for part in (text .. ", or "):gmatch("(.-), or ") do
    part = part:gsub("^an? ", "")
    local best
    for _, noun in ipairs(NOUNS) do
      local a, b = part:find("%f[%a]" .. noun .. "%f[%A]")
      if a and (not best or a < best[1]) then best = { a, b } end
    end
    if best then part = part:sub(1, best[2]) .. "s" .. part:sub(best[2] + 1) end
    parts[#parts + 1] = part
  end
  return table.concat(parts, " or ")
end

-- What a spec expects, as a noun phrase: "a positive number", "one of "fp32", "bf16"".
function M.describe(spec)
  local k = spec.kind
  if k == "string" then
    if spec.enum then return "one of " .. quote_list(spec.enum) end
    if spec.pattern_doc then return spec.pattern_doc end
    return spec.path and "a path (string)" or "a string"
  elseif k == "number" then
    local noun = spec.integer and "integer" or "number"
    if spec.gt == 0 and not spec.max and not spec.lt then return "a positive " .. noun end
    local bounds = {}
    if spec.min then bounds[#bounds + 1] = ">= " .. number_text(spec.min) end
    if spec.gt then bounds[#bounds + 1] = "> " .. number_text(spec.gt) end
    if spec.max then bounds[#bounds + 1] = "<= " .. number_text(spec.max) end
    if spec.lt then bounds[#bounds + 1] = "< " .. number_text(spec.lt) end
    local article = noun == "integer" and "an " or "a "
    if #bounds == 0 then return article .. noun end
    return article .. noun .. " " .. table.concat(bounds, " and ")
  elseif k == "boolean" then return "true or false"
  elseif k == "func" then return "a function"
  elseif k == "any" then return "any value"
  elseif k == "size" then return "a size (bytes, or a text like \"8GiB\")"
  elseif k == "list" then return "a list of " .. plural(M.describe(spec.of))
  elseif k == "record" then return "a table"
  elseif k == "map" then return "a table whose values are " .. plural(M.describe(spec.of))
  elseif k == "const" then return pretty.scalar(spec.value)
  elseif k == "oneof" then
    local parts = {}
    for i, alt in ipairs(spec.alternatives) do parts[i] = alt.short or M.describe(alt) end
    return table.concat(parts, ", or ")
  end
  return "?"
end

-- How a found value is shown in a message.
function M.show_value(v)
  local t = type(v)
  if t == "string" then return ("%q"):format(v) end
  if t == "number" then return number_text(v) end
  if t == "table" then return "a table" end
  if t == "function" then return "a function" end
  return tostring(v)
end

-- ---------------------------------------------------------------- checking
-- A checker state: errors and warnings as { path = "optim.lr", msg = "..." }.
function M.new_report()
  local r = { errors = {}, warnings = {} }
  -- `at` is the path whose origin (the file that set it) the message should name.
  function r.error(path, msg, at) r.errors[#r.errors + 1] = { path = path, msg = msg, at = at or path } end
  function r.warn(path, msg) r.warnings[#r.warnings + 1] = { path = path, msg = msg, at = path } end
  return r
end

local function join(path, key)
  if path == "" then return tostring(key) end
  if type(key) == "number" then return ("%s[%d]"):format(path, key) end
  return path .. "." .. key
end
M.join = join

-- Whether t is a list: keys 1..n and no others (the empty table is one).
local function is_list(t) return pretty.sequence_length(t) ~= nil end

local check

-- Returns true when v is acceptable for spec (without reporting): used to pick oneof branches.
local function accepts(spec, v)
  local r = M.new_report()
  check(spec, v, "", r, { quiet_paths = true })
  return #r.errors == 0
end

local function field_names(spec)
  local names = {}
  for name in pairs(spec.fields) do names[#names + 1] = name end
  table.sort(names)
  return names
end
M.field_names = field_names

-- Checks v against spec, reporting at path. opts.quiet_paths: no file-existence warnings.
check = function(spec, v, path, r, opts)
  local k = spec.kind
  local function bad()
    r.error(path, ("expected %s, got %s"):format(M.describe(spec), M.show_value(v)))
  end
  if k == "any" then return end
  if k == "const" then
    if v ~= spec.value then bad() end
    return
  end
  if k == "oneof" then
    for _, alt in ipairs(spec.alternatives) do
      if accepts(alt, v) then
        check(alt, v, path, r, opts)   -- again, for warnings
        return
      end
    end
    -- No alternative fits. If exactly one alternative has the value's Lua type, report
    -- its detailed errors (more useful than the union's description).
    local same_type = {}
    for _, alt in ipairs(spec.alternatives) do
      local ak = alt.kind
      local lua_type = (ak == "record" or ak == "map" or ak == "list") and "table"
        or (ak == "func" and "function") or (ak == "size" and type(v))
        or (ak == "const" and type(alt.value)) or ak
      if lua_type == type(v) then same_type[#same_type + 1] = alt end
    end
    -- A table that fits no record alternative: report the errors of the closest one
    -- (fewest problems), e.g. "unknown key 'segmnts' (did you mean 'segments'?)".
    if type(v) == "table" and #same_type >= 1 then
      local best, best_n
      for _, alt in ipairs(same_type) do
        local trial = M.new_report()
        check(alt, v, path, trial, { quiet_paths = true })
        if not best_n or #trial.errors < best_n then best, best_n = alt, #trial.errors end
      end
      return check(best, v, path, r, opts)
    end
    -- narrow = true: a number that one alternative alone could be gets that one's message
    -- (batch.size = 0: "expected a positive integer", not every alternative's)
    if spec.narrow and #same_type == 1 and type(v) == "number" then return check(same_type[1], v, path, r, opts) end
    return bad()
  end
  if k == "string" then
    if type(v) ~= "string" then return bad() end
    if spec.enum then
      for _, e in ipairs(spec.enum) do if e == v then return end end
      r.error(path, ("expected %s, got %s%s"):format(M.describe(spec), M.show_value(v),
        suggest.hint(v, spec.enum)))
      return
    end
    if spec.pattern or spec.patterns then
      local matched = false
      for _, p in ipairs(spec.patterns or { spec.pattern }) do
        if v:match(p) then matched = true break end
      end
      if not matched then
        r.error(path, ("expected %s, got %s%s"):format(M.describe(spec), M.show_value(v), spec.hint and spec.hint(v) or ""))
        return
      end
    end
    if spec.path and not opts.quiet_paths and spec.exists and not spec.exists(v) then
      r.warn(path, ("%s does not exist yet%s"):format(v, spec.missing_hint and (" (" .. spec.missing_hint .. ")") or ""))
    end
    return
  end
  if k == "number" then
    if type(v) ~= "number" or v ~= v then return bad() end
    if spec.integer and v ~= math.floor(v) then return bad() end
    if (spec.min and v < spec.min) or (spec.gt and v <= spec.gt) or (spec.max and v > spec.max)
      or (spec.lt and v >= spec.lt) then return bad() end
    return
  end
  if k == "boolean" then if type(v) ~= "boolean" then bad() end return end
  if k == "func" then if type(v) ~= "function" then bad() end return end
  if k == "size" then
    local _, why = M.parse_size(v)
    if why then r.error(path, ("expected a size, got %s: %s"):format(M.show_value(v), why)) end
    return
  end
  if k == "list" then
    if type(v) ~= "table" or not is_list(v) then return bad() end
    if spec.min_items and #v < spec.min_items then
      r.error(path, ("expected at least %d item%s, got %d"):format(spec.min_items, spec.min_items == 1 and "" or "s", #v))
    end
    if spec.max_items and #v > spec.max_items then
      r.error(path, ("expected at most %d items, got %d"):format(spec.max_items, #v))
    end
    for i, item in ipairs(v) do check(spec.of, item, join(path, i), r, opts) end
    return
  end
  if k == "map" then
    if type(v) ~= "table" then return bad() end
    for key, item in pairs(v) do
      if type(key) ~= "string" then
        r.error(path, ("keys must be strings, got %s"):format(M.show_value(key)))
      else
        check(spec.of, item, join(path, key), r, opts)
      end
    end
    return
  end
  if k == "record" then
    if type(v) ~= "table" then return bad() end
    local names = field_names(spec)
    for key, item in pairs(v) do
      local fspec = type(key) == "string" and spec.fields[key]
      if not fspec then
        local shown = type(key) == "string" and key or ("[" .. M.show_value(key) .. "]")
        r.error(path, ("unknown key '%s'%s"):format(shown,
          type(key) == "string" and M.key_hint(opts.root, path, key, names) or ""), join(path, shown))
      else
        check(fspec, item, join(path, key), r, opts)
      end
    end
    for _, name in ipairs(names) do
      if spec.fields[name].required and v[name] == nil then
        r.error(join(path, name), ("is required: %s"):format(spec.fields[name].doc or M.describe(spec.fields[name])))
      end
    end
    if spec.check then
      spec.check(v, function(sub, msg) r.error(sub == "" and path or join(path, sub), msg) end)
    end
    return
  end
  error("schema: unknown spec kind " .. tostring(k))
end

function M.check(spec, v, path, r, opts)
  opts = opts or {}
  opts.root = opts.root or spec
  return check(spec, v, path or "", r, opts)
end

-- ---------------------------------------------------------------- key suggestions
local paths_cache = setmetatable({}, { __mode = "k" })

-- Every key of root as { path, parent, name, aliases }.
local function key_paths(root)
  if paths_cache[root] then return paths_cache[root] end
  local list = {}
  for _, row in ipairs(M.reference(root)) do
    local parent, name = row.path:match("^(.*)%.([^%.]+)$")
    list[#list + 1] = { path = row.path, parent = parent or "", name = name or row.path,
                        aliases = row.spec.aliases or {} }
  end
  paths_cache[root] = list
  return list
end

local function quoted_alternatives(items)
  local parts = {}
  for i, s in ipairs(items) do parts[i] = "'" .. s .. "'" end
  if #parts == 1 then return parts[1] end
  return table.concat(parts, ", ", 1, #parts - 1) .. " or " .. parts[#parts]
end

-- The hint for an unknown key `key` inside the record at `parent` (siblings: the names
-- valid there), as " (did you mean ...?)" or "". In order of likelihood: a name another
-- library uses for a key (an alias), the same name at another level ("lr" at the top ->
-- optim.lr; model.lora -> the top-level lora), a typo of a sibling ("lrate" -> "lr"), a
-- typo of a key at another level. Paths outside parent (every path, with full = true: the
-- command line names keys by their full path) are shown in full.
function M.key_hint(root, parent, key, siblings, full)
  if not root or root.kind ~= "record" then return suggest.hint(key, siblings or {}) end
  local all, lk = key_paths(root), key:lower()
  local function shown(e)
    if e.parent == parent and not full then return e.path:match("[^%.]+$") end
    return e.path
  end
  local function say(found)
    table.sort(found, function(a, b) return a.path < b.path end)
    local names, top = {}, false
    for i, e in ipairs(found) do
      names[i] = shown(e)
      if e.parent == "" and parent ~= "" then top = true end
    end
    if #names == 1 and top then return (" (did you mean the top-level key '%s'?)"):format(names[1]) end
    return (" (did you mean %s?)"):format(quoted_alternatives(names))
  end
  local found = {}
  for _, e in ipairs(all) do
    for _, a in ipairs(e.aliases) do if a:lower() == lk then found[#found + 1] = e end end
  end
  if #found == 0 then
    for _, e in ipairs(all) do
      if e.name:lower() == lk and e.parent ~= parent then found[#found + 1] = e end
    end
  end
  if #found > 0 then return say(found) end
  local sib = suggest.closest(key, siblings or {})
  if sib then return (" (did you mean '%s'?)"):format(full and parent ~= "" and (parent .. "." .. sib) or sib) end
  local elsewhere = {}
  for _, e in ipairs(all) do if e.parent ~= parent then elsewhere[#elsewhere + 1] = e.name end end
  local name = suggest.closest(key, elsewhere)
  if not name then return "" end
  for _, e in ipairs(all) do
    if e.name == name and e.parent ~= parent then found[#found + 1] = e end
  end
  return say(found)
end

-- ---------------------------------------------------------------- defaults
-- Fills defaults into v (a record value) in place, recursively; returns the value.
-- Fields whose default is nil stay absent; a record field with `default_table = true`
-- is created (and filled) when absent.
function M.apply_defaults(spec, v)
  if spec.kind == "oneof" then
    for _, alt in ipairs(spec.alternatives) do
      if alt.kind == "record" and type(v) == "table" and accepts(alt, v) then return M.apply_defaults(alt, v) end
    end
    return v
  end
  if spec.kind ~= "record" or type(v) ~= "table" then return v end
  for name, fspec in pairs(spec.fields) do
    if v[name] == nil then
      if fspec.default_table then
        v[name] = {}
      elseif fspec.default ~= nil then
        local d = fspec.default
        if type(d) == "table" then d = M.copy(d) end
        v[name] = d
      end
    end
    if v[name] ~= nil then v[name] = M.apply_defaults(fspec, v[name]) end
  end
  return v
end

-- A checked copy of v (the part of a recipe at path, described by spec) with its defaults
-- filled in; nil and the problems ({ "loss.scale: expected a positive number, got 0", ...})
-- when it does not check. opts.root: the whole recipe's spec, for key suggestions.
function M.resolve(spec, v, path, opts)
  local r = M.new_report()
  M.check(spec, v, path, r, { quiet_paths = true, root = opts and opts.root })
  if #r.errors > 0 then
    table.sort(r.errors, function(a, b) return a.at < b.at end)
    local problems = {}
    for i, e in ipairs(r.errors) do problems[i] = ("%s: %s"):format(e.path, e.msg) end
    return nil, problems
  end
  return M.apply_defaults(spec, M.copy(v))
end

function M.copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = M.copy(v) end
  return c
end

-- ---------------------------------------------------------------- paths
-- The value of t at a dotted path ("batch.size"), or nil where the path leaves the tables.
function M.get_path(t, path)
  local cur = t
  for p in path:gmatch("[^%.]+") do
    if type(cur) ~= "table" then return nil end
    cur = cur[p]
  end
  return cur
end

-- Sets t's value at a dotted path, making the tables on the way that are missing (or are
-- not tables).
function M.set_path(t, path, value)
  local cur = t
  local parts = {}
  for p in path:gmatch("[^%.]+") do parts[#parts + 1] = p end
  for i = 1, #parts - 1 do
    if type(cur[parts[i]]) ~= "table" then cur[parts[i]] = {} end
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = value
end

-- The spec at a dotted path ("optim.lr"), or nil and the nearest known prefix and the
-- names that would have been valid there.
function M.lookup(spec, path)
  local cur, walked = spec, {}
  for part in path:gmatch("[^%.]+") do
    local nextspec
    local candidates = {}
    local function try(s)
      if s.kind == "record" then
        for _, n in ipairs(field_names(s)) do candidates[#candidates + 1] = n end
        if s.fields[part] then nextspec = nextspec or s.fields[part] end
      elseif s.kind == "map" then
        nextspec = nextspec or s.of
      elseif s.kind == "list" and tonumber(part) then
        nextspec = nextspec or s.of
      elseif s.kind == "any" then
        nextspec = nextspec or s
      elseif s.kind == "oneof" then
        for _, alt in ipairs(s.alternatives) do try(alt) end
      end
    end
    try(cur)
    if not nextspec then return nil, table.concat(walked, "."), candidates, part end
    walked[#walked + 1] = part
    cur = nextspec
  end
  return cur
end

-- ---------------------------------------------------------------- reference
-- Every key as { path, type, default, doc }, in display order, for `trainer check --keys`.
function M.reference(spec)
  local rows = {}
  local function walk(s, path)
    if path ~= "" then
      local default = s.default
      local dtext = default == nil and "" or pretty.literal(default)
      if s.default_doc then dtext = s.default_doc end
      rows[#rows + 1] = { path = path, type = s.type_doc or M.describe(s), default = dtext, doc = s.doc or "", spec = s }
    end
    -- rec's keys in display order, each name once: the records of a oneof may share a name,
    -- and the first record's spec of it is the one shown
    local function fields_of(rec, seen)
      for _, n in ipairs(rec.order or field_names(rec)) do
        if not seen[n] then
          seen[n] = true
          walk(rec.fields[n], path == "" and n or (path .. "." .. n))
        end
      end
    end
    if s.kind == "record" then fields_of(s, {}) end
    if s.kind == "map" and s.of.kind == "record" then walk(s.of, path .. ".NAME") end   -- a map of records' keys
    if s.kind == "oneof" then
      local seen = {}
      for _, alt in ipairs(s.alternatives) do
        if alt.kind == "record" then fields_of(alt, seen) end
      end
    end
  end
  walk(spec, "")
  return rows
end

return M
