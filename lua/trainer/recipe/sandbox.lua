-- trainer.recipe.sandbox: what a recipe's code may reach.
--
-- Recipes are shared between teams, so a recipe is someone else's code. Two rules:
--
--  * Reading a recipe (the file, everything it extends and requires, and command-line
--    overrides: `trainer check`, `plan`, `check --diff`, and the loading before a run)
--    happens in a sandbox of plain Lua: string, table, math, bit, coroutine,
--    os.getenv/time/clock/date/difftime, io.write, load of source text, and the trainer
--    helpers version, root and bytes. Nothing that runs a command, writes a file, loads
--    native or compiled code, or reaches the interpreter's internals (os.execute,
--    io.popen, io.open for writing, loadfile, dofile, require of modules off the recipe
--    path, ffi, debug, package, setfenv/getfenv, collectgarbage) works then, whoever wrote
--    the recipe; a refused call is an error naming the file, line and function, even when
--    the recipe catches it with pcall. An instruction and a memory limit stop a recipe
--    that loops or balloons while it is read.
--
--  * Running a recipe's functions (hooks, loop, eval.fn, data.filter) during training:
--    every recipe gets the trainer API; a trusted recipe also gets the rest (processes,
--    files, require, ffi, debug). A file is trusted when it is named on the command line
--    itself, lies under the installation's recipes/ or under a folder of
--    TRAINER_TRUSTED_RECIPES, or when the command has --trust. Files reached through
--    TRAINER_RECIPE_PATH, extends or require are not trusted otherwise. Trusted recipes
--    may also open files for reading while they are read.
--
-- Each file gets its own environment, so each function a recipe defines keeps the rights
-- of the file that defined it.
local native = require("trainer.native")
local sys = require("trainer.core.sys")
local errors = require("trainer.core.errors")

local M = {}

M.trust_variable = "TRAINER_TRUSTED_RECIPES"

-- Limits while reading: Lua instructions, and growth of the Lua heap (strings and tables).
-- (The shipped recipes take about 50 thousand instructions to read, trainer's own checking
-- included.)
M.limits = { instructions = 10 * 1000 * 1000, memory = 512 * 1024 * 1024 }

-- ---------------------------------------------------------------- phase
local depth = 0          -- > 0 while a recipe is being read
local state              -- the limit hook's state while reading
local sources = {}       -- chunk names ("@path", "=command line (...)") of sandboxed code

function M.reading() return depth > 0 end

local function format_size(bytes)
  return require("trainer.recipe.schema").format_size(bytes)
end

-- The innermost frame of sandboxed code, from level upwards: "FILE:LINE" or nil.
local function recipe_where(level)
  level = (level or 2) + 1
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then return nil end
    if sources[info.source] then
      local s = info.source:gsub("^[@=]", "")
      return ("%s:%d"):format(s, info.currentline)
    end
    level = level + 1
  end
end
M.where = recipe_where

-- The hook that enforces the limits: counts instructions; on a line (each new line and each
-- loop iteration) compares the heap with where it started. Once over, it raises in every
-- sandboxed frame it meets, so that a recipe's pcall cannot swallow the stop.
local function limit_hook(event)
  local s = state
  if not s then return end
  if event == "count" then
    s.count = s.count + s.step
    if s.count > M.limits.instructions and not s.tripped then
      s.tripped = ("the recipe was still running after %d million Lua instructions while it was being read "
        .. "(an endless loop?). A recipe only declares a run: reading it must be quick; work that takes long "
        .. "belongs in a hook or loop, which run during training."):format(math.floor(M.limits.instructions / 1e6))
    end
  elseif not s.tripped then
    local used = collectgarbage("count") * 1024 - s.base
    if used > M.limits.memory then
      s.tripped = ("the recipe holds more than %s of memory while it is being read (a string or table that keeps "
        .. "growing?); reading a recipe may use at most %s."):format(format_size(M.limits.memory),
        format_size(M.limits.memory))
    end
  end
  if s.tripped then
    local info = debug.getinfo(2, "Sl")
    if info and sources[info.source] then
      if not s.fast then s.fast = true; debug.sethook(limit_hook, "l", 1) end
      errors.user("%s:%d: %s", (info.source:gsub("^[@=]", "")), info.currentline, s.tripped)
    end
  end
end

-- A copy of the string library whose rep refuses results over the memory limit while
-- reading (string.rep("x", 10e9) would otherwise be a 10 GB string, or LuaJIT's
-- silent empty one).
local function guarded_string()
  local s = {}
  for k, v in pairs(string) do s[k] = v end
  local rep = string.rep
  s.rep = function(str, n, sep)
    if depth > 0 and type(n) == "number" then
      local size = (#tostring(str) + #tostring(sep or "")) * n
      if size > M.limits.memory then
        errors.user("%s: string.rep would make a string of %s; reading a recipe may use at most %s of memory.",
          recipe_where(2) or "recipe", format_size(size), format_size(M.limits.memory))
      end
    end
    return rep(str, n, sep)
  end
  return s
end

local function guarded_table()
  local t = {}
  for k, v in pairs(table) do t[k] = v end
  local concat = table.concat
  t.concat = function(list, sep, i, j)
    if depth > 0 and type(list) == "table" then
      local size, n = 0, 0
      for x = i or 1, j or #list do
        local v = list[x]
        size = size + ((type(v) == "string" or type(v) == "number") and #tostring(v) or 0)
        n = n + 1
      end
      size = size + #tostring(sep or "") * math.max(n - 1, 0)
      if size > M.limits.memory then
        errors.user("%s: table.concat would make a string of %s; reading a recipe may use at most %s of memory.",
          recipe_where(2) or "recipe", format_size(size), format_size(M.limits.memory))
      end
    end
    return concat(list, sep, i, j)
  end
  return t
end

local method_string = guarded_string()   -- the strings' methods ("x"):rep(n) while reading

-- Runs fn(...) as the reading of a recipe: refusals apply, the limits are counted, string
-- methods are the guarded ones. Nested readings share the outermost one's limits.
function M.read(fn, ...)
  if depth > 0 then
    depth = depth + 1
    local r = { pcall(fn, ...) }
    depth = depth - 1
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, table.maxn(r))
  end
  local old_hook, old_mask, old_count = debug.gethook()
  local mt = getmetatable("")
  local old_index = mt.__index
  collectgarbage()
  state = { count = 0, step = 1000, base = collectgarbage("count") * 1024 }
  depth = 1
  mt.__index = method_string
  debug.sethook(limit_hook, "l", state.step)
  local r = { pcall(fn, ...) }
  debug.sethook()
  mt.__index = old_index
  depth = 0
  state = nil
  if old_hook then debug.sethook(old_hook, old_mask, old_count) end
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, table.maxn(r))
end

-- ---------------------------------------------------------------- trust
local function realdir(d)
  return sys.realpath(d) or d
end

local function under(file_real, dir)
  local d = realdir(dir):gsub("/+$", "")
  return file_real:sub(1, #d + 1) == d .. "/"
end

-- The folders of TRAINER_TRUSTED_RECIPES.
function M.trusted_folders()
  local list = {}
  for entry in (os.getenv(M.trust_variable) or ""):gmatch("[^:]+") do list[#list + 1] = entry end
  return list
end

-- Whether `file` is trusted, and why (a phrase). opts: all (--trust), direct (the file
-- named on the command line), via (how the file was reached: "TRAINER_RECIPE_PATH",
-- "extends", "require").
function M.trust_of(file, opts)
  opts = opts or {}
  if opts.all then return true, "--trust" end
  local real = sys.realpath(file) or file
  if opts.direct and (sys.realpath(opts.direct) or opts.direct) == real then
    return true, "named on the command line"
  end
  local root = native.root()
  if root and under(real, root .. "/recipes") then return true, "the project's own recipes/" end
  for _, d in ipairs(M.trusted_folders()) do
    if under(real, d) then return true, ("under %s, on %s"):format(d, M.trust_variable) end
  end
  if opts.via == "TRAINER_RECIPE_PATH" then
    return false, "found through TRAINER_RECIPE_PATH, not on " .. M.trust_variable
  end
  return false, ("reached through %s, not named on the command line, not in recipes/ nor on %s"):format(
    opts.via or "extends or require", M.trust_variable)
end

-- ---------------------------------------------------------------- refusals
-- The paragraph for a refused call of `what` (e.g. "os.execute") by code of env spec sp.
local function refusal(sp, what, where)
  where = where or sp.name
  if depth > 0 then
    return ("%s: %s is refused while a recipe is being read. Recipes (with what they extend and require, and "
      .. "command-line overrides) are read in a sandbox of plain Lua (string, table, math, os.getenv/time/date, "
      .. "and the trainer helpers version, root and bytes), so that `trainer check`, `trainer plan` and loading a "
      .. "run never run a command, write a file or load native code. Move the call into a hook or loop: those run "
      .. "during training, with %s for a trusted recipe (named on the command line, in recipes/, on %s, or run "
      .. "with --trust)."):format(where, what, what, M.trust_variable)
  end
  local dir = sp.file and (sys.realpath(sp.file) or sp.file):match("^(.*)/[^/]*$") or "FOLDER"
  return ("%s: %s is refused: %s is not a trusted recipe (%s), so its hooks and loop run with the trainer API "
    .. "only, without processes, files or native code. If you trust its code, run again with --trust, or add "
    .. "its folder to %s (folders separated by ':'), e.g. export %s=%s"):format(where, what, sp.name, sp.why,
    M.trust_variable, M.trust_variable, dir)
end

local function refuse(sp, what)
  local where = recipe_where(2)
  if not where and sp.file then
    -- no frame of the file left (`return os.execute "..."` is a tail call): the line where
    -- the file names the function, when the scan finds it
    local name = what:gsub(" %(writing%)$", "")
    for _, u in ipairs(M.scan_file(sp.file)) do
      if u.what == name then where = ("%s:%d"):format(sp.file, u.line) break end
    end
  end
  where = where or sp.name
  local msg = refusal(sp, what, where)
  if sp.record then sp.record({ what = what, where = where, msg = msg, reading = depth > 0 }) end
  errors.user("%s", msg)
end

-- Whether code of sp may use a function of class kind ("read": open a file for reading;
-- anything else: processes, writing, native code).
local function allowed(sp, kind)
  if not sp.trusted then return false end
  return kind == "read" or depth == 0
end

local function guard(sp, what, fn, kind)
  return function(...)
    if allowed(sp, kind) then return fn(...) end
    refuse(sp, what)
  end
end

local os_free = { getenv = true, time = true, clock = true, date = true, difftime = true }

local function os_proxy(sp)
  local p = {}
  for k, f in pairs(os) do
    p[k] = os_free[k] and f or guard(sp, "os." .. k, f, "process")
  end
  return p
end

local function is_write_mode(mode)
  return type(mode) == "string" and (mode:find("[wa+]") ~= nil)
end

local function io_proxy(sp)
  -- no stdin while reading: `trainer check` must not wait for input
  local p = { write = io.write, stdout = io.stdout, stderr = io.stderr, type = io.type, flush = io.flush }
  p.read = guard(sp, "io.read", io.read, "process")
  setmetatable(p, { __index = function(_, k)
    if k == "stdin" and allowed(sp, "process") then return io.stdin end
    return nil
  end })
  p.open = function(path, mode)
    local write = is_write_mode(mode)
    if allowed(sp, write and "write" or "read") then return io.open(path, mode) end
    refuse(sp, write and "io.open (writing)" or "io.open")
  end
  p.lines = function(path, ...)
    if allowed(sp, path == nil and "process" or "read") then return io.lines(path, ...) end
    refuse(sp, "io.lines")
  end
  p.input = function(f)
    if f == nil or allowed(sp, "read") then return io.input(f) end
    refuse(sp, "io.input")
  end
  p.output = function(f)
    if f == nil or allowed(sp, "write") then return io.output(f) end
    refuse(sp, "io.output")
  end
  p.close = function(f)
    if f ~= nil and io.type(f) then return io.close(f) end
    if allowed(sp, "write") then return io.close(f) end
    refuse(sp, "io.close")
  end
  p.popen = guard(sp, "io.popen", io.popen, "process")
  p.tmpfile = guard(sp, "io.tmpfile", io.tmpfile, "write")
  return p
end

-- The globals refused to untrusted code and while reading; trusted code running during
-- training gets the real ones.
local held_globals = {
  debug = true, package = true, jit = true, setfenv = true, getfenv = true, collectgarbage = true,
  newproxy = true, module = true, gcinfo = true, loadfile = true, dofile = true, ffi = true,
}

local plain_names = {
  "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawset", "rawlen",
  "select", "setmetatable", "tonumber", "tostring", "type", "unpack", "xpcall",
}

-- The trainer helpers a recipe may use while it is being read; the rest of the trainer API
-- is for its hooks and loop.
local helpers = { version = true, root = true, bytes = true }

local function trainer_proxy(sp)
  return setmetatable({}, {
    __index = function(_, k)
      local trainer = require("trainer")
      if helpers[k] or depth == 0 then return trainer[k] end
      local lazy = getmetatable(trainer).__keys or {}
      if rawget(trainer, k) == nil and lazy[k] == nil then return nil end
      refuse(sp, "trainer." .. tostring(k))
    end,
    __newindex = function(_, k) error(("trainer.%s: the trainer API cannot be changed by a recipe"):format(
      tostring(k)), 2) end,
    __metatable = false,
  })
end

-- The trainer modules of the trainer API (what `trainer.NAME` loads), which untrusted code
-- may also require during training.
local function api_module(name)
  if name == "trainer" then return true end
  for _, m in pairs(getmetatable(require("trainer")).__keys or {}) do
    if m == name then return true end
  end
  return false
end

-- Whether a module of this name exists outside the recipe path (trainer's own, a C
-- module, ffi).
local function module_exists(name)
  if package.loaded[name] ~= nil or package.preload[name] ~= nil then return true end
  if package.searchpath then
    return (package.searchpath(name, package.path) or package.searchpath(name, package.cpath)) ~= nil
  end
  return false
end

-- Loads Lua source text as a chunk of the sandbox: binary (bytecode) chunks are refused,
-- and the JIT compiler is off for it so that the instruction limit sees every loop.
-- Returns the chunk or nil and a message.
function M.load_text(text, chunkname, env)
  if type(text) ~= "string" then return nil, "expected source text" end
  if text:byte(1) == 27 then
    return nil, ("%s: is a compiled (bytecode) chunk; recipes are read only as Lua source text"):format(
      (chunkname:gsub("^[@=]", "")))
  end
  local chunk, err = loadstring(text, chunkname)
  if not chunk then return nil, err end
  sources[chunkname] = true
  setfenv(chunk, env)
  jit.off(chunk, true)
  return chunk
end

-- Reads a file as source text for the sandbox: returns the chunk, or nil and a message
-- (no such file, syntax error, bytecode).
function M.load_file(path, env)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("*a")
  f:close()
  if text:byte(1) == 27 then
    return nil, ("%s: is a compiled (bytecode) chunk, not Lua source; recipes are read only as source text, "
      .. "so give the .lua file it was compiled from"):format(path)
  end
  if text:sub(1, 1) == "#" then text = "--" .. text end   -- a #! line
  return M.load_text(text, "@" .. path, env)
end

-- A new environment. sp: { name = what messages call the code (its file, or "command line
-- (k=v)"), file = its path or nil, trusted, why, require = function(name) -> found, value
-- (the recipe path's modules), record = function(refusal) }.
function M.env(sp)
  local env = {}
  for _, n in ipairs(plain_names) do env[n] = rawget(_G, n) end
  env.string = guarded_string()
  env.table = guarded_table()
  local m = {} for k, v in pairs(math) do m[k] = v end
  env.math = m
  local b = {} for k, v in pairs(bit) do b[k] = v end
  env.bit = b
  local co = {} for k, v in pairs(coroutine) do co[k] = v end
  env.coroutine = co
  env.getmetatable = function(x)
    if type(x) == "string" then return nil end
    return getmetatable(x)
  end
  env.os = os_proxy(sp)
  env.io = io_proxy(sp)
  env.trainer = trainer_proxy(sp)
  env.loadstring = function(text, chunkname)
    local name = "=" .. (chunkname and tostring(chunkname):gsub("^[@=]", "") or ("loadstring in " .. sp.name))
    return M.load_text(text, name, env)
  end
  env.load = function(ld, chunkname, mode, _)
    if mode ~= nil and mode ~= "t" and type(ld) == "string" and ld:byte(1) == 27 then
      refuse(sp, "load of a binary (bytecode) chunk")
    end
    if type(ld) == "function" then
      local parts = {}
      while true do
        local piece = ld()
        if piece == nil or piece == "" then break end
        parts[#parts + 1] = piece
      end
      ld = table.concat(parts)
    end
    return env.loadstring(ld, chunkname)
  end
  env.require = function(name)
    if type(name) ~= "string" then error("require: expected a module name (a string)", 2) end
    local found, value = false, nil
    if sp.require then found, value = sp.require(name) end
    if found then return value end
    if name == "trainer" then return env.trainer end
    if depth == 0 and (sp.trusted or api_module(name)) then return require(name) end
    if module_exists(name) then refuse(sp, ("require(%q)"):format(name)) end
    return sp.require_missing(name)
  end
  env._RECIPE = sp.file
  local known = {}
  for k in pairs(env) do known[#known + 1] = k end
  return setmetatable(env, {
    __index = function(_, k)
      if held_globals[k] then
        if depth == 0 and sp.trusted then return rawget(_G, k) or (k == "ffi" and require("ffi")) or nil end
        refuse(sp, tostring(k))
      end
      local suggest = require("trainer.recipe.suggest")
      error(("undefined global '%s'%s"):format(tostring(k), suggest.hint(tostring(k), known)), 2)
    end,
  })
end

-- ---------------------------------------------------------------- what a file uses
-- The uses of refused functions in Lua source text, found by reading its tokens (comments
-- and strings skipped): { { line = N, what = "os.execute" }, ... }. A hook's code is never
-- run by `trainer check`, so this is how check tells which functions a recipe would need.
local io_held = { open = true, popen = true, lines = true, input = true, output = true, tmpfile = true, close = true }

function M.scan(text)
  local uses, tokens = {}, {}
  local i, n, line = 1, #text, 1
  local function long_bracket(at)
    local eq = text:match("^%[(=*)%[", at)
    if not eq then return nil end
    local close = "]" .. eq .. "]"
    local e = text:find(close, at + #eq + 2, true)
    return e and (e + #close - 1) or n
  end
  while i <= n do
    local c = text:sub(i, i)
    if c == "\n" then
      line = line + 1; i = i + 1
    elseif c:match("%s") then
      i = i + 1
    elseif text:sub(i, i + 1) == "--" then
      local e = long_bracket(i + 2)
      if not e then e = (text:find("\n", i, true) or n + 1) - 1 end
      for _ in text:sub(i, e):gmatch("\n") do line = line + 1 end
      i = e + 1
    elseif c == "[" and long_bracket(i) then
      local e = long_bracket(i)
      for _ in text:sub(i, e):gmatch("\n") do line = line + 1 end
      tokens[#tokens + 1] = { t = "string", line = line }
      i = e + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == "\\" then j = j + 2
        elseif d == c or d == "\n" then break
        else j = j + 1 end
      end
      tokens[#tokens + 1] = { t = "string", line = line, v = text:sub(i + 1, j - 1) }
      i = j + 1
    elseif c:match("[%a_]") then
      local name = text:match("^[%w_]+", i)
      tokens[#tokens + 1] = { t = "name", v = name, line = line }
      i = i + #name
    elseif c:match("%d") then
      local num = text:match("^[%w%.]+", i)
      i = i + #num
      tokens[#tokens + 1] = { t = "number", line = line }
    else
      local two = text:sub(i, i + 1)
      if two == ".." or two == "::" then
        tokens[#tokens + 1] = { t = "op", v = two, line = line }; i = i + 2
      else
        tokens[#tokens + 1] = { t = "op", v = c, line = line }; i = i + 1
      end
    end
  end
  for k, tok in ipairs(tokens) do
    local prev, nxt, field = tokens[k - 1], tokens[k + 1], tokens[k + 2]
    local is_field = prev and prev.t == "op" and (prev.v == "." or prev.v == ":")
    local is_key = nxt and nxt.t == "op" and nxt.v == "=" and prev and prev.t == "op" and (prev.v == "{" or prev.v == ",")
    local is_local = prev and prev.t == "name" and (prev.v == "local" or prev.v == "function")
    if tok.t == "name" and not is_field and not is_key and not is_local and tok.v ~= "ffi" then
      local v = tok.v
      local dot = nxt and nxt.t == "op" and nxt.v == "." and field and field.t == "name" and field.v
      if v == "os" and dot and not os_free[dot] then
        uses[#uses + 1] = { line = tok.line, what = "os." .. dot }
      elseif v == "io" and dot and io_held[dot] then
        uses[#uses + 1] = { line = tok.line, what = "io." .. dot }
      elseif held_globals[v] then
        uses[#uses + 1] = { line = tok.line, what = v }
      elseif v == "require" then
        local arg = nxt
        if arg and arg.t == "op" and arg.v == "(" then arg = field end
        if arg and arg.t == "string" and arg.v == "ffi" then
          uses[#uses + 1] = { line = tok.line, what = 'require("ffi")' }
        end
      end
    end
  end
  return uses
end

-- The uses (M.scan) of the file at path, each with its file.
function M.scan_file(path)
  local f = io.open(path, "rb")
  if not f then return {} end
  local text = f:read("*a")
  f:close()
  if text:byte(1) == 27 then return {} end
  local uses = M.scan(text)
  for _, u in ipairs(uses) do u.file = path end
  return uses
end

-- ---------------------------------------------------------------- data files
-- Reads a data-only Lua file (a run's resolved_recipe.lua) in the sandbox with env as its
-- only globals: its value, or nil and a message.
function M.read_data(path, env)
  local chunk, err = M.load_file(path, setmetatable(env or {}, { __index = function(_, k)
    error(("undefined global '%s'"):format(tostring(k)), 2) end }))
  if not chunk then return nil, err end
  local ok, v = pcall(M.read, chunk)
  if not ok then return nil, errors.message(v) end
  return v
end

return M
