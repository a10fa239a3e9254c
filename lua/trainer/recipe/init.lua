-- trainer.recipe: loading a recipe file into one resolved, validated table.
--
--   1. the file runs in its own environment: the standard library, `trainer`, and a
--      `require` that finds Lua files on the recipe path (next to the recipe, then
--      TRAINER_RECIPE_PATH, then recipes/: trainer.recipe.path); reading an undefined
--      global is an error that names it; its `requires` pin is checked (trainer.recipe.version);
--   2. `extends = "parent.lua"` (found on the same path) loads the parent first; the
--      child merges over it: tables key by key, lists and values replace; a cycle is an
--      error that prints the chain;
--   3. command-line overrides `a.b.c=value` apply (values read as Lua literals, else as
--      plain strings; `key=nil` deletes); each must name a key the schema knows;
--   4. the result is checked against trainer.recipe.keys, every error in one pass,
--      each naming the file that set the key; then defaults are filled in.
-- Every failure raises a trainer.errors user error (exit 1 at the CLI).
local errors = require("trainer.core.errors")
local schema = require("trainer.recipe.schema")
local spec = require("trainer.recipe.keys")
local suggest = require("trainer.recipe.suggest")
local native = require("trainer.native")
local rpath = require("trainer.recipe.path")
local version = require("trainer.recipe.version")

local M = {}

-- ---------------------------------------------------------------- paths
-- Where names are found: the naming file's folder, TRAINER_RECIPE_PATH, recipes/
-- (trainer.recipe.path).
local readable = rpath.readable
M.normalize = rpath.normalize

-- ---------------------------------------------------------------- environment
local std_names = {
  "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawset",
  "select", "setmetatable", "getmetatable", "tonumber", "tostring", "type", "unpack", "xpcall",
  "string", "table", "math", "os", "io", "coroutine", "bit", "jit", "debug",
}

local Loader = {}
Loader.__index = Loader

function Loader.new()
  -- module_files: { path, value } of each module a recipe required, for `trainer plan`'s
  -- "where the budget came from"
  -- resolved: where each extends and require resolved (Loader:note)
  return setmetatable({ modules = {}, module_files = {}, resolved = {} }, Loader)
end

-- A fresh environment for a recipe or a module it requires.
function Loader:env(file)
  local env = {}
  for _, n in ipairs(std_names) do env[n] = _G[n] end
  env.trainer = require("trainer")
  env.require = function(name) return self:require(file, name) end
  env._RECIPE = file
  local known = {}
  for k in pairs(env) do known[#known + 1] = k end
  return setmetatable(env, {
    __index = function(_, k)
      error(("undefined global '%s'%s"):format(tostring(k), suggest.hint(tostring(k), known)), 2)
    end,
  })
end

-- Notes where a name given in from_file resolved, for `trainer check`: kind "extends" or
-- "require", and the folder entry it was found in (nil: trainer's own module).
function Loader:note(kind, from_file, name, file, folder)
  for _, r in ipairs(self.resolved) do
    if r.kind == kind and r.from == from_file and r.name == name then return end
  end
  self.resolved[#self.resolved + 1] = { kind = kind, from = from_file, name = name, file = file, folder = folder }
end

-- require() inside recipes: NAME.lua or NAME/init.lua (dots are folders) on the recipe
-- path (trainer.recipe.path), else one of trainer's own modules.
function Loader:require(from_file, name)
  local rel = name:gsub("%.lua$", ""):gsub("%.", "/")
  local c, folder = rpath.find(from_file, { rel .. ".lua", rel .. "/init.lua" })
  if c then
    self:note("require", from_file, name, c, folder)
    local key = native.realpath(c) or c
    if self.modules[key] == nil then
      local chunk, err = loadfile(c)
      if not chunk then errors.user("%s (required by %s)", err, from_file) end
      setfenv(chunk, self:env(c))
      local value = chunk(name)
      self.modules[key] = value == nil and true or value
      self.module_files[#self.module_files + 1] = { path = c, value = value }
    end
    return self.modules[key]
  end
  local ok, mod = pcall(require, name)
  if ok then
    self:note("require", from_file, name, nil, nil)
    return mod
  end
  errors.user("%s: require(%q): %s\n%s", from_file, name,
    rpath.not_found(folder, ("file %s.lua or %s/init.lua"):format(rel, rel)), rpath.fix)
end

-- ---------------------------------------------------------------- one file
local function describe_type(v)
  if v == nil then return "nothing" end
  return type(v) == "table" and "a table" or ("a " .. type(v))
end

-- A recipe's `requires` pin against this binary's version, checked as each file of the
-- chain is read, before its parent is looked for and before any key is checked: a recipe
-- written for a newer trainer may use keys this one does not know.
local function check_pin(path, pin)
  if pin == nil then return end
  local have = version.current()
  local ok, why = version.satisfies(have, pin)
  if ok == nil then
    errors.user("%s: requires = %s: %s. The pin names the trainer versions the recipe works with "
      .. "(`trainer --version` prints this one's, %s).", path, schema.show_value(pin), why, have)
  end
  if not ok then
    errors.user("%s: this recipe needs trainer %s; this is %s. Install a trainer that satisfies the pin, or "
      .. "use a version of the recipe written for %s.", path, pin, have, have)
  end
end

-- A file that fails while it is read may be failing because it was written for a newer
-- trainer: when its text holds a `requires = "..."` literal that this version does not
-- satisfy, that is the error to give.
local function check_written_pin(path)
  local f = io.open(path, "r")
  if not f then return end
  local text = f:read("*a")
  f:close()
  local _, pin = text:match("%f[%w_]requires%s*=%s*([\"'])(.-)%1")
  if pin and version.satisfies(version.current(), pin) == false then check_pin(path, pin) end
end

-- Runs one recipe file; returns its table.
function Loader:run_file(path)
  if not readable(path) then
    errors.user("%s: no such recipe file (give a path to a .lua recipe, e.g. recipes/scandi_lora.lua)", path)
  end
  local chunk, err = loadfile(path)
  if not chunk then
    check_written_pin(path)
    errors.user("%s\nThat is a Lua syntax error in the recipe: fix the line it names.", err)
  end
  setfenv(chunk, self:env(path))
  local ok, result = xpcall(chunk, function(e)
    if errors.is_user_error(e) then return e end
    return tostring(e)
  end)
  if not ok then
    check_written_pin(path)
    if errors.is_user_error(result) then error(result, 0) end
    errors.user("%s\nThe recipe raised this error while it was being read.", result)
  end
  if type(result) ~= "table" then
    errors.user("%s: the recipe returned %s; a recipe must end with `return { model = ..., ... }`",
      path, describe_type(result))
  end
  return result
end

-- ---------------------------------------------------------------- merging
local function is_list(t)
  if type(t) ~= "table" or next(t) == nil then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  for i = 1, n do if t[i] == nil then return false end end
  return true
end

-- child over parent: tables merge key by key, lists and values replace.
local function merge(parent, child)
  if type(parent) ~= "table" or type(child) ~= "table" or is_list(child) or is_list(parent) then
    return schema.copy(child)
  end
  local out = schema.copy(parent)
  for k, v in pairs(child) do
    if type(v) == "table" and type(out[k]) == "table" then out[k] = merge(out[k], v)
    else out[k] = schema.copy(v) end
  end
  return out
end
M.merge = merge

-- Records, for every key path in t, the file that set it.
local function mark_origins(t, prefix, file, origins)
  for k, v in pairs(t) do
    local p = schema.join(prefix, k)
    origins[p] = file
    if type(v) == "table" then mark_origins(v, p, file, origins) end
  end
end

-- Loads path and its extends chain; returns the merged table, origins and the chain.
function Loader:load_chain(path, chain)
  chain = chain or {}
  local real = native.realpath(path) or path
  for i, c in ipairs(chain) do
    if c.real == real then
      local names = {}
      for j = i, #chain do names[#names + 1] = chain[j].path end
      names[#names + 1] = path
      errors.user("extends cycle: %s\nEach recipe may extend another, but the chain must end: remove one of these extends.",
        table.concat(names, " -> "))
    end
  end
  chain[#chain + 1] = { path = path, real = real }
  local t = self:run_file(path)
  check_pin(path, t.requires)
  local origins = {}
  local parent_table, parent_origins = {}, {}
  if t.extends ~= nil then
    if type(t.extends) ~= "string" then
      errors.user("%s: extends: expected a path (string) to a parent recipe, got %s", path, schema.show_value(t.extends))
    end
    local found, folder = rpath.find(path, t.extends)
    if not found then
      errors.user("%s: extends = %q: %s\n%s", path, t.extends, rpath.not_found(folder), rpath.fix)
    end
    self:note("extends", path, t.extends, found, folder)
    parent_table, parent_origins = self:load_chain(found, chain)
  end
  local own = schema.copy(t)
  own.extends = nil
  for k, v in pairs(parent_origins) do origins[k] = v end
  mark_origins(own, "", path, origins)
  return merge(parent_table, own), origins, chain
end

-- ---------------------------------------------------------------- overrides
-- Reads the text after '=' as a Lua literal; anything that is not one is a plain string.
local function parse_value(text)
  if text == "nil" then return nil, true end
  local chunk = load("return " .. text, "=override", "t", setmetatable({}, {
    __index = function() error("not a literal", 0) end }))
  if chunk then
    local ok, v = pcall(chunk)
    if ok and v ~= nil then return v end
  end
  return text
end

-- Applies "a.b.c=value" texts to t; reports unknown paths into report.
local function apply_overrides(t, overrides, origins, report)
  for _, o in ipairs(overrides or {}) do
    local key, text = o:match("^([%w_%.]+)=(.*)$")
    if not key then
      report.error("", ("command line: %q is not an override; write key=value, e.g. optim.lr=1e-4"):format(o), "")
    else
      local found, prefix, names, bad = schema.lookup(spec, key)
      if not found then
        report.error("", ("command line: unknown key '%s'%s"):format(key,
          schema.key_hint(spec, prefix, bad, names or {}, true)), "")
      else
        local value, delete = parse_value(text)
        local parts = {}
        for p in key:gmatch("[^%.]+") do parts[#parts + 1] = tonumber(p) or p end
        local origin = ("command line (%s)"):format(o)
        local cur, walked = t, ""
        for i = 1, #parts - 1 do
          walked = schema.join(walked, parts[i])
          if type(cur[parts[i]]) ~= "table" then
            cur[parts[i]] = {}
            origins[walked] = origin   -- the override created this table
          end
          cur = cur[parts[i]]
        end
        if delete then cur[parts[#parts]] = nil else cur[parts[#parts]] = value end
        origins[key] = origin
        if type(value) == "table" then mark_origins(value, key, origins[key], origins) end
      end
    end
  end
end

-- ---------------------------------------------------------------- resolving
local function origin_of(origins, path, default)
  local p = path
  while p and p ~= "" do
    if origins[p] then return origins[p] end
    p = p:match("^(.*)[%.%[][^%.%[]*$")
  end
  return default
end

local function format_problem(e, origins, top)
  local file = origin_of(origins, e.at, top)
  if e.msg:match("^command line") then return e.msg end
  if e.path == "" then return ("%s: %s"):format(file, e.msg) end
  return ("%s: %s: %s"):format(file, e.path, e.msg)
end

local function basename_noext(p)
  return (p:match("([^/]+)$") or p):gsub("%.lua$", "")
end

-- The file of a recipe named on the command line: the path itself when it is a file, else
-- the name looked for on TRAINER_RECIPE_PATH and in the built-in recipes/.
function M.locate(name)
  if readable(name) then return name end
  local found, folders = rpath.find(nil, name)
  if found then return found end
  errors.user("%s: %s\nGive the path of a .lua recipe (e.g. recipes/scandi_lora.lua) or its name on %s "
    .. "(`trainer recipes` lists them).", name, rpath.not_found(folders, "recipe file"), rpath.variable)
end

-- Resolves a recipe without raising for validation problems:
-- returns { recipe, files, errors = { "..." }, warnings = { "..." }, origins = { key path ->
-- the file (or "command line (...)") that set it }, modules = { { path, value } required },
-- resolved = where each extends and require resolved (Loader:note) }.
-- Loading problems (missing file, syntax error, cycle) still raise.
function M.resolve(path, overrides)
  path = M.locate(path)
  local loader = Loader.new()
  local t, origins, chain = loader:load_chain(path)
  local report = schema.new_report()
  apply_overrides(t, overrides, origins, report)
  schema.check(spec, t, "", report)
  local result = { recipe = t, files = {}, errors = {}, warnings = {}, path = path,
                   origins = origins, modules = loader.module_files, resolved = loader.resolved }
  result.overrides = overrides or {}   -- the command line, for resume (trainer.train.resume)
  for i, c in ipairs(chain) do result.files[i] = c.path end
  table.sort(report.errors, function(a, b) return a.at < b.at end)
  table.sort(report.warnings, function(a, b) return a.at < b.at end)
  for _, e in ipairs(report.errors) do result.errors[#result.errors + 1] = format_problem(e, origins, path) end
  for _, w in ipairs(report.warnings) do
    local msg = format_problem(w, origins, path)
    if w.path == "model.from" and type(t.model) == "table" then
      local hub = t.model.hub or "ORG/NAME"
      msg = ("%s: model.from: %s does not exist yet; download it with: huggingface-cli download %s --local-dir %s")
        :format(origin_of(origins, "model.from", path), t.model.from, hub, t.model.from)
    end
    result.warnings[#result.warnings + 1] = msg
  end
  if #result.errors == 0 then
    schema.apply_defaults(spec, t)
    t.name = t.name or basename_noext(path)
    t.out = t.out or ("runs/" .. t.name)
  end
  return result
end

-- Resolves and raises one user error listing every problem; returns the result of resolve.
function M.load(path, overrides)
  local r = M.resolve(path, overrides)
  if #r.errors == 1 then
    errors.user("%s", r.errors[1])
  elseif #r.errors > 1 then
    errors.user("%s has %d problems:\n  %s\nFix them and run `trainer check %s` again.",
      path, #r.errors, table.concat(r.errors, "\n  "), path)
  end
  return r
end

return M
