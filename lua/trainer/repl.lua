-- trainer.repl: the interactive prompt (`trainer`, `trainer repl [RECIPE]`).
--
-- Habits of LuaJIT's own luajit.c and Torch's trepl: an incomplete chunk (a syntax
-- error at <eof>) continues on the next line; an expression's values are printed
-- (`=expr` too) with a printer that survives cycles and limits depth; an error prints
-- its message and a short traceback and the prompt comes back; Ctrl-C stops the running
-- chunk, not the REPL. Line editing and history (~/.trainer_history) come from libedit.
-- With stdin not a terminal it reads the script from stdin, prints no prompts, and exits
-- at end of input (exit status 0, or 1 when any chunk failed).
local native = require("trainer.native")
local errors = require("trainer.errors")
local pretty = require("trainer.pretty")

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

-- ---------------------------------------------------------------- input
local function history_path()
  local home = os.getenv("HOME")
  return home and (home .. "/.trainer_history") or nil
end

local function make_reader(interactive)
  if interactive then
    local hist = history_path()
    if hist then native.read_history(hist) end
    return function(prompt)
      local line = native.readline(prompt)
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
local function compile(text)
  local fn = loadstring("return " .. text, "=stdin")
  if fn then return fn end
  local err
  fn, err = loadstring(text, "=stdin")
  if fn then return fn end
  if err:match("<eof>[\"']?$") or err:match("'<eof>'") then return nil, err, true end
  return nil, err, false
end

-- Trims the traceback to the user's frames: no REPL, CLI or C internals.
local function short_traceback(msg)
  local lines = {}
  for line in tostring(msg):gmatch("[^\n]+") do
    local internal = line:match("trainer/repl%.lua") or line:match("trainer/cli%.lua")
      or line:match("^%s*%[C%]") or line:match("^%s*%[builtin")
    if not internal then lines[#lines + 1] = line end
  end
  if lines[#lines] == "stack traceback:" then lines[#lines] = nil end
  return table.concat(lines, "\n")
end

local function print_results(ok_and_results)
  local n = ok_and_results.n
  if n <= 1 then return end
  local parts = {}
  for i = 2, n do parts[#parts + 1] = pretty.show(ok_and_results[i]) end
  io.write(table.concat(parts, "\t"), "\n")
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
  if name == "keys" then io.write(require("trainer.keys_doc").markdown()) return end
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
    require("trainer.suggest").hint(name, { "load", "check", "keys", "help", "quit" })))
end

-- ---------------------------------------------------------------- loop
function M.run(opts)
  opts = opts or {}
  local interactive = native.isatty(0) and native.isatty(1)
  local read = make_reader(interactive)
  local env = setmetatable({ trainer = require("trainer") }, { __index = _G })
  env._G = env
  local state = { env = env }
  local failures = 0

  local function report(err)
    failures = failures + 1
    if errors.is_user_error(err) then
      io.stderr:write(err.msg, "\n")
    else
      io.stderr:write(short_traceback(err), "\n")
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
      if not buffer and line:match("^%s*=") then line = "return " .. line:match("^%s*=(.*)$") end
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
        collect(native.icall(fn))
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
