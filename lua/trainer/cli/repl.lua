-- trainer.cli.repl: the interactive prompt (`trainer`, `trainer repl [RECIPE]`).
--
-- Habits of LuaJIT's own luajit.c and Torch's trepl: an incomplete chunk (a syntax
-- error at <eof>) continues on the next line; an expression's values are printed
-- (`=expr` too) with a printer that survives cycles and limits depth; an error prints
-- its message and a short traceback and the prompt comes back; Ctrl-C stops the running
-- chunk, not the REPL. Line editing and history (~/.trainer_history) come from libedit.
-- With stdin not a terminal it reads the script from stdin, prints no prompts, and exits
-- at end of input (exit status 0, or 1 when any chunk failed).
local native = require("trainer.native")
local sys = require("trainer.core.sys")
local errors = require("trainer.core.errors")
local pretty = require("trainer.cli.pretty")

local M = {}

M.help = [[
Lua with the trainer API (the table `trainer`). Expressions print their value.
  :load RECIPE.lua [key=value ...]  validate a recipe and bind it to `recipe`
  :check                            print the loaded recipe, resolved
  :keys                             the recipe key reference
  :help                             this text
  :quit                             leave (also Ctrl-D)
  =expr                             print the value of expr
Ctrl-C stops the running chunk; an error never ends the REPL.]]

-- ---------------------------------------------------------------- completion
local lua_keywords = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do lua_keywords[#lua_keywords + 1] = w end

-- Adds the names of t's fields, and of what its metatable's __index tables offer (methods
-- of a class and its ancestors), to names. A metatable's __keys (a table whose keys are
-- names) lists fields that load on first use, such as trainer's submodules.
local function collect_fields(t, names, seen)
  if seen[t] then return end
  seen[t] = true
  if type(t) == "table" then
    for k in pairs(t) do names[k] = true end
  end
  local mt = (type(t) == "table" or type(t) == "string") and getmetatable(t) or nil
  if type(mt) ~= "table" then return end
  if type(rawget(mt, "__keys")) == "table" then
    for k in pairs(rawget(mt, "__keys")) do names[k] = true end
  end
  local index = rawget(mt, "__index")
  if type(index) == "table" then collect_fields(index, names, seen) end
end

-- The value a dotted path names in env ("trainer.core.memory"), or nil. Indexing may load a
-- lazy submodule (as typing the name would); an error (a strict global) is no value.
local function resolve(env, path)
  local value = env
  for name in (path .. "."):gmatch("([^.]*)%.") do
    if not name:match("^[%a_][%w_]*$") then return nil end
    local t = type(value)
    if t ~= "table" and t ~= "string" then return nil end
    local ok, v = pcall(function() return value[name] end)
    if not ok then return nil end
    value = v
  end
  return value
end

-- Tab completion: the full words that complete word ("trainer.mem" -> "trainer.core.memory",
-- "pri" -> "print", "s:up" -> "s:upper"), sorted. Names starting with "_" only when the
-- typed part does (the internals of a module stay out of the way).
function M.completions(env, word)
  local path, sep, partial = word:match("^(.-)([.:])([%w_]*)$")
  local names, lead = {}, ""
  if path then
    local value = resolve(env, path)
    if value == nil then return {} end
    collect_fields(value, names, {})
    if sep == ":" then
      for k in pairs(names) do
        local ok, v = pcall(function() return value[k] end)
        if not ok or type(v) ~= "function" then names[k] = nil end
      end
    end
    lead = path .. sep
  else
    if word ~= "" and not word:match("^[%a_][%w_]*$") then return {} end
    partial = word
    collect_fields(env, names, {})
    for k in pairs(_G) do names[k] = true end   -- pairs sees raw keys: no strict __index
    for _, k in ipairs(lua_keywords) do names[k] = true end
  end
  local out = {}
  for k in pairs(names) do
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and k:sub(1, #partial) == partial
      and (k:sub(1, 1) ~= "_" or partial:sub(1, 1) == "_") then
      out[#out + 1] = lead .. k
    end
  end
  table.sort(out)
  return out
end

-- ---------------------------------------------------------------- input
local function history_path()
  local home = os.getenv("HOME")
  return home and (home .. "/.trainer_history") or nil
end

local function make_reader(interactive, env)
  if interactive then
    -- Before any history call: libedit reads the locale when it starts.
    local locale = native.init_line_editing()
    if locale == "C" or locale == "POSIX" then
      io.stderr:write("warning: no UTF-8 locale is installed (C.UTF-8 or the one in LANG), so the ",
        "prompt drops non-ASCII input; install one (Debian: locales) or pipe the input in\n")
    end
    local hist = history_path()
    if hist then native.read_history(hist) end
    local function complete(word) return M.completions(env, word) end
    return function(prompt)
      local line = native.readline(prompt, complete)
      if line and line:match("%S") then
        native.add_history(line)
        if hist then native.write_history(hist, 1000) end
      end
      return line
    end
  end
  return function() return io.read("*l") end
end

-- ---------------------------------------------------------------- chunks
-- Compiles text as an expression if it is one, else as statements.
-- Returns fn | nil, err, incomplete
-- The expression form is `return (...)(expr)`, called with an identity function: as
-- `return expr`, a call would be a tail call, and a tail-called error() has no caller
-- line to name ("boom" instead of "stdin:1: boom", and no frame in the traceback).
local function compile(text)
  local fn = loadstring("return (...)(" .. text .. "\n)", "=stdin")
  if fn then return fn end
  local err
  fn, err = loadstring(text, "=stdin")
  if fn then return fn end
  if err:match("<eof>[\"']?$") or err:match("'<eof>'") then return nil, err, true end
  return nil, err, false
end

local function identity(...) return ... end

M.max_frames = 6

-- The user's part of a traceback: the frames of the chunk typed at the prompt and of what
-- it called, not the REPL below it (everything after stdin's "in main chunk" is repl.lua
-- and cli.lua) and not C frames; at most M.max_frames, innermost first, the main chunk last.
function M.short_traceback(msg)
  local text = tostring(msg)
  local head, trace = text:match("^(.-)\nstack traceback:\n(.*)$")
  if not head then return text end
  local frames = {}
  for line in trace:gmatch("[^\n]+") do
    local frame = line:match("^%s*(.-)%s*$")
    local internal = frame:match("^%[C%]") or frame:match("^%[builtin") or frame:match("^%(tail call%)")
      or frame == "..." or frame:match("trainer/repl%.lua") or frame:match("trainer/cli%.lua")
    if not internal then frames[#frames + 1] = frame end
    if frame:match("^stdin:%d+: in main chunk$") then break end
  end
  if #frames == 0 then return head end
  local out = { head, "stack traceback:" }
  local n, keep = #frames, M.max_frames
  for i, f in ipairs(frames) do
    if n <= keep or i < keep - 1 or i == n then
      out[#out + 1] = "\t" .. f
    elseif i == keep - 1 then
      out[#out + 1] = "\t..."   -- LuaJIT's traceback already elides deep stacks: no count
    end
  end
  return table.concat(out, "\n")
end

-- An expression's values, tab-separated. A string with line breaks (a report) prints as
-- its text; any other value as pretty.show has it (strings quoted, so "" and " " show).
function M.format_results(res, first)
  local parts = {}
  for i = first or 1, res.n do
    local v = res[i]
    if type(v) == "string" and v:find("\n", 1, true) then
      parts[#parts + 1] = (v:gsub("\n$", ""))
    else
      parts[#parts + 1] = pretty.show(v)
    end
  end
  return table.concat(parts, "\t")
end

local function print_results(ok_and_results)
  if ok_and_results.n <= 1 then return end
  io.write(M.format_results(ok_and_results, 2), "\n")
end

-- ---------------------------------------------------------------- commands
local function split_words(s)
  local words = {}
  for w in s:gmatch("%S+") do words[#words + 1] = w end
  return words
end

local function command(line, state)
  local words = split_words(line:sub(2))
  local name = words[1] or ""
  if name == "quit" or name == "q" or name == "exit" then return "quit" end
  if name == "help" or name == "h" or name == "?" then print(M.help) return end
  if name == "keys" then io.write(require("trainer.recipe.keys_doc").markdown()) return end
  if name == "load" then
    if not words[2] then error(errors.user("usage: :load RECIPE.lua [key=value ...]")) end
    local overrides = {}
    for i = 3, #words do overrides[#overrides + 1] = words[i] end
    local r = require("trainer.recipe").load(words[2], overrides)
    state.env.recipe = r.recipe
    state.loaded = r
    for _, w in ipairs(r.warnings) do io.stderr:write("warning: ", w, "\n") end
    print(("loaded %s as `recipe` (%d file%s)"):format(words[2], #r.files, #r.files == 1 and "" or "s"))
    return
  end
  if name == "check" then
    if not state.loaded then print("no recipe loaded: :load RECIPE.lua") return end
    print("return " .. pretty.literal(state.loaded.recipe))
    return
  end
  print(("unknown command ':%s'%s; :help lists the commands"):format(name,
    require("trainer.recipe.suggest").hint(name, { "load", "check", "keys", "help", "quit" })))
end

-- ---------------------------------------------------------------- loop
function M.run(opts)
  opts = opts or {}
  local interactive = sys.isatty(0) and sys.isatty(1)
  local env = setmetatable({ trainer = require("trainer") }, { __index = _G })
  env._G = env
  local read = make_reader(interactive, env)
  local state = { env = env }
  local failures = 0

  local function report(err)
    failures = failures + 1
    if errors.is_user_error(err) then
      io.stderr:write(err.msg, "\n")
    else
      io.stderr:write(M.short_traceback(err), "\n")
    end
    io.stderr:flush()
  end

  if interactive then
    print(("trainer %s REPL — :help for commands, Ctrl-D to leave"):format(require("trainer").version))
  end
  if opts.recipe then
    local ok, err = pcall(command, ":load " .. opts.recipe .. " " .. table.concat(opts.overrides or {}, " "), state)
    if not ok then report(err) end
  end

  local buffer = nil
  while true do
    local line = read(buffer and ">> " or "> ")
    if line == false then            -- Ctrl-C at the prompt abandons the chunk
      buffer = nil
      io.write("\n")
    elseif line == nil then          -- end of input
      if interactive then io.write("\n") end
      if buffer then
        local _, err = compile(buffer)
        report(err or "incomplete chunk at end of input")
      end
      break
    elseif not buffer and line:match("^%s*:") then
      local ok, res = pcall(command, line:match("^%s*(.*)$"), state)
      if not ok then report(res) elseif res == "quit" then break end
    else
      -- `=expr` (Lua 5.1's prompt) is the expression itself: compile tries it as one first.
      if not buffer and line:match("^%s*=") then line = line:match("^%s*=(.*)$") end
      buffer = buffer and (buffer .. "\n" .. line) or line
      local fn, err, incomplete = compile(buffer)
      if fn then
        buffer = nil
        setfenv(fn, env)
        -- Ctrl-C works through a debug hook, which compiled traces never check: keep the
        -- chunk typed at the prompt (and the functions it defines) in the interpreter.
        jit.off(fn, true)
        local res = { n = 0 }
        local function collect(...) res = { n = select("#", ...), ... } end
        collect(native.icall(fn, identity))
        if res[1] then print_results(res) else report(res[2]) end
        io.stdout:flush()
      elseif not incomplete then
        buffer = nil
        report(err)
      end
    end
  end
  if interactive then return 0 end
  return failures > 0 and 1 or 0
end

return M
