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
local sys = require("trainer.core.sys")
local rpath = require("trainer.recipe.path")
local version = require("trainer.recipe.version")
local sandbox = require("trainer.recipe.sandbox")

local M = {}

-- ---------------------------------------------------------------- paths
-- Where names are found: the naming file's folder, TRAINER_RECIPE_PATH, recipes/
-- (trainer.recipe.path).
local readable = rpath.readable
M.normalize = rpath.normalize

-- ---------------------------------------------------------------- environment
local Loader = {}
Loader.__index = Loader

-- opts: trust (--trust: every file trusted), direct (the file named on the command line).
function Loader.new(opts)
  -- module_files: { path, value } of each module a recipe required, for `trainer plan`'s
  -- "where the budget came from"
  -- resolved: where each extends and require resolved (Loader:note)
  -- trust: { file, trusted, why } of each file read (trainer.recipe.sandbox)
  -- refused: the calls the sandbox refused (each { what, where, msg, reading })
  opts = opts or {}
  return setmetatable({ modules = {}, module_files = {}, resolved = {}, trust = {}, refused = {},
                        opts = opts }, Loader)
end

-- A fresh sandbox environment (trainer.recipe.sandbox) for a recipe file or a module it
-- requires; via: how the file was reached ("TRAINER_RECIPE_PATH", "extends", "require").
function Loader:env(file, via)
  local trusted, why = sandbox.trust_of(file, { all = self.opts.trust, direct = self.opts.direct, via = via })
  local seen = false
  for _, t in ipairs(self.trust) do seen = seen or t.file == file end
  if not seen then self.trust[#self.trust + 1] = { file = file, trusted = trusted, why = why } end
  return self:sandbox_env({ name = file, file = file, trusted = trusted, why = why }, file)
end

function Loader:sandbox_env(sp, from_file)
  sp.record = function(r) self.refused[#self.refused + 1] = r end
  sp.require = function(name) return self:require(from_file, name) end
  sp.require_missing = function(name) return self:require_missing(from_file, name) end
  return sandbox.env(sp)
end

-- Raises the first refusal of the reading, if any: a recipe that catches a refused call with
-- pcall still stops.
function Loader:raise_refused()
  for _, r in ipairs(self.refused) do
    if r.reading then errors.user("%s", r.msg) end
  end
end

-- Notes where a name given in from_file resolved, for `trainer check`: kind "extends" or
-- "require", and the folder entry it was found in (nil: trainer's own module).
function Loader:note(kind, from_file, name, file, folder)
  for _, r in ipairs(self.resolved) do
    if r.kind == kind and r.from == from_file and r.name == name then return end
  end
  self.resolved[#self.resolved + 1] = { kind = kind, from = from_file, name = name, file = file, folder = folder }
end

local function via_of(folder, kind)
  return folder and folder.from == rpath.variable and rpath.variable or kind
end

-- require() inside recipes: NAME.lua or NAME/init.lua (dots are folders) on the recipe
-- path (trainer.recipe.path), read in the sandbox as recipes are. Returns true and the
-- module's value, or false when there is no such file (the sandbox then decides about
-- trainer's own modules).
function Loader:require(from_file, name)
  local rel = name:gsub("%.lua$", ""):gsub("%.", "/")
  local c, folder = rpath.find(from_file, { rel .. ".lua", rel .. "/init.lua" })
  if not c then return false end
  self:note("require", from_file, name, c, folder)
  local key = sys.realpath(c) or c
  if self.modules[key] == nil then
    local chunk, err = sandbox.load_file(c, self:env(c, via_of(folder, "require")))
    if not chunk then errors.user("%s (required by %s)", err, from_file) end
    local value = chunk(name)
    self.modules[key] = value == nil and true or value
    self.module_files[#self.module_files + 1] = { path = c, value = value }
  end
  return true, self.modules[key]
end

function Loader:require_missing(from_file, name)
  local rel = name:gsub("%.lua$", ""):gsub("%.", "/")
  local _, folder = rpath.find(from_file, { rel .. ".lua", rel .. "/init.lua" })
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

-- Runs one recipe file in the sandbox; returns its table. via: how it was reached (Loader:env).
function Loader:run_file(path, via)
  if not readable(path) then
    errors.user("%s: no such recipe file (give a path to a .lua recipe, e.g. recipes/scandi_lora.lua)", path)
  end
  local chunk, err = sandbox.load_file(path, self:env(path, via))
  if not chunk then
    if err:find("bytecode", 1, true) then errors.user("%s", err) end
    check_written_pin(path)
    errors.user("%s\nThat is a Lua syntax error in the recipe: fix the line it names.", err)
  end
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
function Loader:load_chain(path, chain, via)
  chain = chain or {}
  local real = sys.realpath(path) or path
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
  local t = self:run_file(path, via)
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
    parent_table, parent_origins = self:load_chain(found, chain, via_of(folder, "extends"))
  end
  local own = schema.copy(t)
  own.extends = nil
  for k, v in pairs(parent_origins) do origins[k] = v end
  mark_origins(own, "", path, origins)
  return merge(parent_table, own), origins, chain
end

-- ---------------------------------------------------------------- overrides
-- Reads the text after '=' as a Lua value, evaluated in the sandbox as recipes are (plain
-- Lua: `1e-4`, `{"query","key"}`, `math.huge`); a bare word, and anything that is not a
-- value (it names an undefined global, or does not parse), is a plain string. A refused
-- function or a limit stops with its error. env: the override's sandbox environment.
local function parse_value(text, chunkname, env)
  if text == "nil" then return nil, true end
  if text:match("^[%a_][%w_]*$") and text ~= "true" and text ~= "false" then return text end
  -- in parentheses: `return f(x)` would be a tail call, leaving no frame to name the override
  local chunk = sandbox.load_text("return (" .. text .. "\n)", chunkname, env)
  if chunk then
    local ok, v = pcall(chunk)
    if not ok and errors.is_user_error(v) then error(v, 0) end
    if ok and v ~= nil then return v end
  end
  return text
end

-- Applies "a.b.c=value" texts to t; reports unknown paths into report.
local function apply_overrides(t, overrides, origins, report, loader)
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
        local name = ("command line (%s)"):format(o)
        local env = loader:sandbox_env({ name = name, trusted = true, why = "typed on the command line" }, name)
        local value, delete = parse_value(text, "=" .. name, env)
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
  if found then return found, folders end
  errors.user("%s: %s\nGive the path of a .lua recipe (e.g. recipes/scandi_lora.lua) or its name on %s "
    .. "(`trainer recipes` lists them).", name, rpath.not_found(folders, "recipe file"), rpath.variable)
end

-- Resolves a recipe without raising for validation problems:
-- returns { recipe, files, errors = { "..." }, warnings = { "..." }, origins = { key path ->
-- the file (or "command line (...)") that set it }, modules = { { path, value } required },
-- resolved = where each extends and require resolved (Loader:note) }.
-- Loading problems (missing file, syntax error, cycle) still raise.
-- opts: trust (--trust: trust every file; trainer.recipe.sandbox). The reading happens in
-- the sandbox; result.trust lists each file read with whether it is trusted and why, and
-- result.uses the functions each uses that the sandbox denies (sandbox.scan).
function M.resolve(path, overrides, opts)
  return sandbox.read(M.resolve_unguarded, path, overrides, opts)
end

function M.resolve_unguarded(path, overrides, opts)
  opts = opts or {}
  local direct = readable(path) and path or nil
  local folder
  path, folder = M.locate(path)
  local loader = Loader.new({ trust = opts.trust, direct = direct })
  local t, origins, chain = loader:load_chain(path, nil, folder and via_of(folder, nil))
  local report = schema.new_report()
  apply_overrides(t, overrides, origins, report, loader)
  loader:raise_refused()
  schema.check(spec, t, "", report)
  local result = { recipe = t, files = {}, errors = {}, warnings = {}, path = path,
                   origins = origins, modules = loader.module_files, resolved = loader.resolved,
                   trust = loader.trust, uses = {} }
  for _, tr in ipairs(loader.trust) do
    local uses = sandbox.scan_file(tr.file)
    if #uses > 0 then
      result.uses[#result.uses + 1] = { file = tr.file, trusted = tr.trusted, why = tr.why, uses = uses }
    end
  end
  result.overrides = overrides or {}   -- the command line, for resume (trainer.train.resume)
  for i, c in ipairs(chain) do result.files[i] = c.path end
  table.sort(report.errors, function(a, b) return a.at < b.at end)
  table.sort(report.warnings, function(a, b) return a.at < b.at end)
  for _, e in ipairs(report.errors) do result.errors[#result.errors + 1] = format_problem(e, origins, path) end
  for _, u in ipairs(result.uses) do
    if not u.trusted then
      result.warnings[#result.warnings + 1] = ("%s: %s: the sandbox denies %s to a recipe that is not trusted "
        .. "(%s), so a hook or loop that calls %s will stop the run. If you trust its code: --trust, or add its "
        .. "folder to %s."):format(u.file, M.describe_uses(u.uses), #u.uses == 1 and "it" or "them", u.why,
        #u.uses == 1 and "it" or "one", sandbox.trust_variable)
    end
  end
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
-- "os.execute (line 7), io.open (line 9)" of sandbox.scan's uses.
function M.describe_uses(uses)
  local parts = {}
  for _, u in ipairs(uses) do parts[#parts + 1] = ("%s (line %d)"):format(u.what, u.line) end
  return table.concat(parts, ", ")
end

function M.load(path, overrides, opts)
  local r = M.resolve(path, overrides, opts)
  if #r.errors == 1 then
    errors.user("%s", r.errors[1])
  elseif #r.errors > 1 then
    errors.user("%s has %d problems:\n  %s\nFix them and run `trainer check %s` again.",
      path, #r.errors, table.concat(r.errors, "\n  "), path)
  end
  return r
end

return M
