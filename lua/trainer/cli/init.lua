-- trainer.cli: the command line. main(args) returns the process exit status:
-- 0 success, 1 a user error (the message names the file, key or line, and the fix),
-- 2 out of memory (the message carries the ledger). Nothing escapes as a bare traceback:
-- user errors print their message; anything else is a bug and prints a traceback.
local errors = require("trainer.core.errors")
local native = require("trainer.native")
local sys = require("trainer.core.sys")
local suggest = require("trainer.recipe.suggest")
local cli_flags = require("trainer.cli.flags")

local M = {}

M.usage = [[
usage: trainer RECIPE.lua [key=value ...] [--quiet]        train (validates the recipe first)
       trainer resume RUN_DIR [key=value ...]              continue a stopped run from its folder alone
       trainer check RECIPE.lua [key=value ...]            validate a recipe, print it resolved
       trainer check --diff A.lua B.lua [key=value ...]    the keys whose resolved values differ
       trainer check --keys                                the recipe key reference
       trainer plan RECIPE.lua [--budget SIZE] [--json]    memory plan without training
                                                           (exit 2 when it does not fit the budget)
       trainer plan RECIPE.lua --fit [--card NAME]         the changes memory.fit would make, without running
       trainer report RUN_DIR                              draw a run's loss, lr, eval and memory (SVG + HTML)
       trainer eval RECIPE.lua [--checkpoint DIR]          evaluate a model only: the metrics as JSON
       trainer tokenize MODEL_DIR FILE                     token ids, one JSON array a line
       trainer encode MODEL_DIR FILE [--adapter DIR]       sentence embeddings, one JSON array a line
       trainer classify MODEL_DIR FILE [--adapter DIR]     labels of texts or TAB-separated pairs
       trainer mine MODEL_DIR FILE [--num-negatives N]     hard negatives for (anchor, positive) rows, JSONL
       trainer rerank MODEL_DIR QUERIES DOCS [--top-k N]   a cross-encoder's ranking of the documents per query
       trainer merge MODEL_DIR ADAPTER_DIR OUT_DIR         fold a LoRA adapter into a copy of its model
       trainer keys                                        the recipe key reference (Markdown)
       trainer recipes                                     the recipes on TRAINER_RECIPE_PATH and recipes/
       trainer repl [RECIPE.lua]                           interactive Lua with the trainer API
       trainer                                             same as `trainer repl`
       trainer run SCRIPT.lua [args ...]                   run a Lua script with the trainer API
       trainer --help | --version

Overrides set any recipe key: optim.lr=1e-4 batch.size=8 lora.targets={"query","key"}
precision=bf16 resume=nil (deletes the key). See README.md for the recipe keys.
--trust (train, resume): the hooks and loop of every file of the recipe may run commands and
reach files, not only those of trusted ones (README.md, "Trusting recipes").]]

local subcommands = { "check", "plan", "repl", "resume", "run", "help" }

local function eprint(s) io.stderr:write(s, "\n") end

-- Runs fn(...) and turns any error into an exit status and a message on stderr.
local function protect(fn, ...)
  local args = { n = select("#", ...), ... }
  local ok, status = xpcall(function() return fn(unpack(args, 1, args.n)) end, function(e)
    if errors.is_user_error(e) then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if ok then return status or 0 end
  if errors.is_user_error(status) then
    eprint("trainer: " .. status.msg)
    return status.kind == "oom" and 2 or 1
  end
  eprint("trainer: internal error (a bug in trainer; please report it with this text):\n" .. tostring(status))
  return 1
end

-- Splits "RECIPE k=v k=v --flag" into the recipe path, overrides and flags.
local function split_args(args, first, known_flags)
  local path, overrides, flags = nil, {}, {}
  local function unknown(name)
    local names = {}
    for k in pairs(known_flags) do names[#names + 1] = k end
    errors.user("unknown option --%s%s\n%s", name, suggest.hint(name, names):gsub("'(%w+)'", "'--%1'"), M.usage)
  end
  local i = first
  while i <= #args do
    local a = args[i]
    if a:sub(1, 2) == "--" then
      local name, value
      name, value, i = cli_flags.take(args, i, known_flags, unknown, M.usage)
      flags[name] = value
    else
      if a:find("=", 1, true) and path then
        overrides[#overrides + 1] = a
      elseif not path then
        path = a
      else
        errors.user("unexpected argument %q: after the recipe come only key=value overrides\n%s", a, M.usage)
      end
      i = i + 1
    end
  end
  return path, overrides, flags
end

local function print_warnings(r)
  for _, w in ipairs(r.warnings) do eprint("warning: " .. w) end
end

-- ---------------------------------------------------------------- commands
function M.check(args)
  for i = 2, #args do
    if args[i] == "--diff" then return require("trainer.cli.check_diff").run(args) end
  end
  local path, overrides, flags = split_args(args, 2, { keys = "bool", quiet = "bool", trust = "bool" })
  if flags.keys then
    io.write(require("trainer.recipe.keys_doc").markdown())
    return 0
  end
  if not path then errors.user("check needs a recipe: trainer check RECIPE.lua [key=value ...]") end
  local recipe = require("trainer.recipe")
  local r = recipe.load(path, overrides, { trust = flags.trust })
  if not flags.quiet then
    io.write("-- ", r.path, " resolved", #r.files > 1 and (" (extends " .. table.concat(r.files, " <- ", 2) .. ")") or "", "\n")
    for _, line in ipairs(require("trainer.recipe.path").describe(r.resolved)) do io.write("-- ", line, "\n") end
    -- what each file uses that the sandbox denies, and whether its hooks and loop may
    for _, u in ipairs(r.uses) do
      io.write(("-- %s uses what the sandbox denies: %s; %s (%s): its hooks and loop %s\n"):format(u.file,
        recipe.describe_uses(u.uses), u.trusted and "trusted" or "not trusted", u.why,
        u.trusted and "may call them during training" or "may not call them"))
    end
    io.write("return ", require("trainer.cli.pretty").literal(r.recipe), "\n")
  end
  print_warnings(r)
  eprint(("%s: OK%s"):format(path, #r.warnings > 0 and (" (%d warning%s)"):format(#r.warnings, #r.warnings == 1 and "" or "s") or ""))
  return 0
end

function M.train(args)
  local path, overrides, flags = split_args(args, 1, { quiet = "bool", trust = "bool" })
  local r = require("trainer.recipe").load(path, overrides, { trust = flags.trust })
  print_warnings(r)
  return (require("trainer.train.loop").train(r, { quiet = flags.quiet }))
end

-- trainer resume RUN_DIR [key=value ...]: the folder's own run, from its latest checkpoint.
function M.resume(args)
  local dir, overrides, flags = split_args(args, 2, { quiet = "bool", trust = "bool" })
  if not dir then errors.user("resume needs a run folder: trainer resume RUN_DIR [key=value ...], e.g. trainer resume "
    .. "runs/minilm_sts_lora") end
  local r, summary = require("trainer.train.resume").load(dir, overrides, { trust = flags.trust })
  if #overrides == 0 and summary and not summary.stopped_by_signal and type(summary.steps) == "number"
      and type(summary.total_steps) == "number" and summary.steps >= summary.total_steps then
    eprint(("trainer: %s is complete (step %d of %d); nothing to resume. To train it further on purpose: trainer "
      .. "resume %s steps=N"):format(r.recipe.out, summary.steps, summary.total_steps, r.recipe.out))
    return 0
  end
  if #overrides == 0 and summary and type(summary.early_stopped) == "table" then
    eprint(("trainer: %s stopped early at step %d (early_stopping: %s stopped improving); nothing to resume. To train "
      .. "it further on purpose: trainer resume %s early_stopping=nil"):format(r.recipe.out, summary.early_stopped.step,
      tostring(r.recipe.eval.primary), r.recipe.out))
    return 0
  end
  print_warnings(r)
  return (require("trainer.train.loop").train(r, { quiet = flags.quiet }))
end

-- Without the model folder the plan needs a shape: a preset named after the folder, and
-- the command that plans with it, runnable as printed (the user's overrides and flags kept).
local function plan_needs_model(path, overrides, flags, model)
  local name = ((model.from or "") .. " " .. (model.hub or "")):lower()
  local preset = name:find("minilm") and (name:find("l12") and "minilm-l12" or "minilm-l6")
    or name:find("large") and "bert-large" or "bert-base"
  local shape = require("trainer.models.presets")[preset]
  local word = require("trainer.plan.alternatives").shell_word
  local cmd = { "trainer", "plan", word(path) }
  local replaced = { ["model.from"] = true, ["model.arch"] = true, ["model.config"] = true, ["model.init"] = true }
  for _, o in ipairs(overrides) do
    if not replaced[o:match("^([^=]*)=")] then cmd[#cmd + 1] = word(o) end
  end
  cmd[#cmd + 1] = "model.from=nil"
  cmd[#cmd + 1] = "model.arch=" .. (model.arch or require("trainer.models.registry").default)
  cmd[#cmd + 1] = "model.config=" .. preset
  if model.init == "pretrained" then cmd[#cmd + 1] = "model.init=random" end
  if flags.budget then cmd[#cmd + 1] = "--budget"; cmd[#cmd + 1] = word(flags.budget) end
  if flags.card then cmd[#cmd + 1] = "--card"; cmd[#cmd + 1] = word(flags.card) end
  if flags.json then cmd[#cmd + 1] = "--json" end
  if flags.fit then cmd[#cmd + 1] = "--fit" end
  errors.user("model.from: %s has no config.json, and `trainer plan` needs the model's shape. Download the model%s, "
    .. "or plan now with the %s preset's shape (%d layers, hidden size %d, a %d-word vocabulary; the model's own "
    .. "may differ):\n  %s", model.from,
    model.hub and (" (huggingface-cli download %s --local-dir %s)"):format(model.hub, model.from) or "",
    preset, shape.num_hidden_layers, shape.hidden_size, shape.vocab_size, table.concat(cmd, " "))
end

-- Exit 0 when the plan fits its budget (or there is none), 2 when it does not (as a run
-- that runs out of memory), 1 for a user error.
function M.plan(args)
  local path, overrides, flags = split_args(args, 2, { budget = "value", json = "bool", card = "value",
                                                       trust = "bool", fit = "bool" })
  if not path then
    errors.user("plan needs a recipe: trainer plan RECIPE.lua [--budget 8GiB] [--card a10] [--json] [--fit]")
  end
  -- --card NAME: plan for that card on a machine without it (its memory, its precisions)
  local planned_card = flags.card and require("trainer.plan.cards").find(flags.card)
  local r = require("trainer.recipe").load(path, overrides, { trust = flags.trust })
  if planned_card and not tostring(r.recipe.device):match("^cuda") then r.recipe.device = "cuda" end
  local schema = require("trainer.recipe.schema")
  local plan = require("trainer.plan")
  local budget, source
  if flags.budget then
    local why
    budget, why = schema.parse_size(flags.budget)
    if not budget then errors.user("--budget %s: %s", tostring(flags.budget), why) end
  else
    budget, source = plan.budget(r)
  end
  local m = r.recipe.model
  if m.from then
    local f = io.open(m.from .. "/config.json", "r")
    if not f then plan_needs_model(path, overrides, flags, m) end
    f:close()
  end
  local C = require("trainer.core.ffi")
  local cuda_available = C.tr_cuda_device_count() > 0
  local device = tostring(r.recipe.device)
  local on_cuda = device:match("^cuda") ~= nil or (device == "auto" and cuda_available)
  local card = require("trainer.core.card")
  local the_card
  if on_cuda then
    local dev = device:match("^cuda") and device or "cuda"
    the_card = planned_card or card.of(dev)
    if the_card then
      card.refuse_precision(the_card, planned_card and ("--card " .. flags.card) or dev, r.recipe.precision, path)
    end
  end
  local kind = on_cuda and "cuda" or "cpu"
  if planned_card and not flags.budget then
    budget, source = planned_card.memory_bytes, ("the %s's memory (%s)"):format(planned_card.name,
      require("trainer.recipe.schema").format_size(planned_card.memory_bytes))
    local limit = r.recipe.memory and r.recipe.memory.limit and schema.parse_size(r.recipe.memory.limit)
    if limit and limit > 0 and limit < budget then
      budget, source = limit, ("memory.limit = %s"):format(tostring(r.recipe.memory.limit))
    end
  elseif not flags.budget then
    -- what a run on the planned device may use, as the run itself checks it: memory.limit or
    -- the device's own memory (this machine's RAM on the CPU), whichever is smaller
    local cap, what = require("trainer.plan.check").capacity(r.recipe, kind)
    if cap and (not budget or cap < budget) then budget, source = cap, what end
    if source then source = ("%s, for a run on %s"):format(source, kind) end
  end
  -- batch.size = "auto", memory.fit = true or --fit: the configuration a run would choose
  -- (trainer.plan.fit), planned in place of the recipe as written
  local fit = require("trainer.plan.fit")
  local record
  if flags.fit or fit.wanted(r.recipe) then
    local asked = r.recipe
    if flags.fit and not (asked.memory and asked.memory.fit) then
      asked = require("trainer.recipe.schema").copy(asked)
      asked.memory = asked.memory or {}
      asked.memory.fit = true
    end
    record = fit.choose(asked, { device = kind, budget = budget, budget_what = source, card = the_card,
      estimate_opts = { cuda_available = cuda_available }, path = path })
    r.recipe = record.recipe
  end
  local p = plan.estimate(r.recipe, { cuda_available = cuda_available })
  if p.device == "cuda" then p.card = the_card end
  local fits = plan.fits(p, budget)
  local info = { budget_source = source, alternatives = fits == false and plan.alternatives(p, budget) or nil,
    fit = record }
  if flags.json then
    io.write(require("trainer.core.json").encode(plan.json(p, budget, info), 2), "\n")
  else
    if record then
      io.write(fit.describe(record), "\n")
      if #record.args > 0 then
        io.write(("add to the recipe, or after it on the command line: %s\n"):format(table.concat(record.args, " ")))
      end
      if flags.fit then return 0 end
    end
    io.write(plan.format(p, budget, path, info), "\n")
  end
  return fits == false and 2 or 0
end

function M.repl(args)
  local path, overrides = split_args(args, 2, {})
  return require("trainer.cli.repl").run({ recipe = path, overrides = overrides })
end

function M.run(args)
  local script = args[2]
  if not script then errors.user("run needs a script: trainer run SCRIPT.lua [args ...]") end
  local chunk, err = loadfile(script)
  if not chunk then
    local f = io.open(script, "r")
    if not f then errors.user("%s: no such script", script) end
    f:close()
    errors.user("%s", err)
  end
  local script_args = { [0] = script }
  for i = 3, #args do script_args[#script_args + 1] = args[i] end
  rawset(_G, "arg", script_args)
  -- The script's own errors are the user's, not trainer's: message and traceback, exit 1.
  local ok, result = xpcall(function() return chunk(unpack(script_args)) end, function(e)
    if errors.is_user_error(e) then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if not ok then
    if errors.is_user_error(result) then error(result, 0) end
    local lines = {}
    for line in result:gmatch("[^\n]+") do
      if not line:match("trainer/cli%.lua") and not line:match("^%s*%[C%]: in function 'xpcall'") then
        lines[#lines + 1] = line
      end
    end
    errors.user("%s", table.concat(lines, "\n"))
  end
  if type(result) == "number" then return result end
  return 0
end

-- Commands beyond the built-in ones live in lua/trainer/cli/commands/<name>.lua, each a
-- table { usage = "trainer name ARGS   what it does", run = function(args) -> status }.
-- Adding a command is adding one file.
function M.command_module(name)
  if not name:match("^[%w_]+$") then return nil end
  local root = native.root()
  local f = io.open(root .. "/lua/trainer/cli/commands/" .. name .. ".lua", "r")
  if not f then return nil end
  f:close()
  return require("trainer.cli.commands." .. name)
end

function M.command_names()
  local names = {}
  for _, file in ipairs(sys.list_dir(native.root() .. "/lua/trainer/cli/commands") or {}) do
    local n = file:match("^([%w_]+)%.lua$")
    if n then names[#names + 1] = n end
  end
  table.sort(names)
  return names
end

-- The usage text for --help: M.usage names every command in short; a command module's
-- own usage line (with its options) replaces the short line of that command, and a
-- module that M.usage does not name yet is added after `trainer run`, so none is missed.
function M.full_usage()
  local text, missing = M.usage, {}
  for _, n in ipairs(M.command_names()) do
    local mod = M.command_module(n)
    if mod and mod.usage then
      local line = "       " .. mod.usage
      local found
      text, found = text:gsub("\n       trainer " .. n .. "%f[^%w_][^\n]*", function() return "\n" .. line end, 1)
      if found == 0 then missing[#missing + 1] = line end
    end
  end
  if #missing == 0 then return text end
  return (text:gsub("(       trainer run SCRIPT%.lua[^\n]*\n)", "%1" .. table.concat(missing, "\n"):gsub("%%", "%%%%") .. "\n", 1))
end

-- ---------------------------------------------------------------- main
-- Unknown globals in trainer's own code and in scripts are errors, not silent nils.
local function strict_globals()
  if getmetatable(_G) then return end
  setmetatable(_G, {
    __index = function(_, k)
      local names = {}
      for name in pairs(_G) do if type(name) == "string" then names[#names + 1] = name end end
      error(("undefined global '%s'%s"):format(tostring(k), suggest.hint(tostring(k), names)), 2)
    end,
  })
end

function M.main(args)
  rawset(_G, "trainer", require("trainer"))
  strict_globals()
  local cmd = args[1]
  if cmd == nil then return protect(M.repl, { "repl" }) end
  if cmd == "--help" or cmd == "-h" or cmd == "help" then io.write(M.full_usage(), "\n") return 0 end
  if cmd == "--version" or cmd == "-V" then io.write("trainer ", require("trainer").version, "\n") return 0 end
  if cmd == "check" then return protect(M.check, args) end
  if cmd == "plan" then return protect(M.plan, args) end
  -- a training run may have joined an mpirun job (trainer.dist): leave it, or end it on failure
  if cmd == "resume" then return require("trainer.dist").exit(protect(M.resume, args)) end
  if cmd == "repl" then return protect(M.repl, args) end
  if cmd == "run" then return protect(M.run, args) end
  local extra = M.command_module(cmd)
  if extra then return protect(extra.run, args) end
  if cmd:sub(1, 1) == "-" then
    eprint(("trainer: unknown option %s\n%s"):format(cmd, M.usage))
    return 1
  end
  if cmd:match("%.lua$") then return require("trainer.dist").exit(protect(M.train, args)) end
  local known = { unpack(subcommands) }
  for _, n in ipairs(M.command_names()) do known[#known + 1] = n end
  eprint(("trainer: unknown command '%s'%s\n%s"):format(cmd, suggest.hint(cmd, known), M.full_usage()))
  return 1
end

return M
