-- trainer.train.resume: which run a folder holds, and whether a command may continue it.
--
-- A run is identified by the resolved_recipe.lua in its folder: the fully merged recipe it
-- started with, and (in its "-- command:" line) the command line that made it. Resuming
-- writes into `out` (metrics.jsonl is cut back to the resumed step, summary.json and new
-- checkpoints are replaced), so it is refused, before anything is written, when `out`
-- holds another run's outputs:
--   * resume = CHECKPOINT from a different folder than `out`, when `out` already holds
--     run outputs (starting a new run from another run's checkpoint is fine: give it a
--     new, empty out folder);
--   * `trainer RECIPE ... resume=...` whose resolved recipe differs from the folder's
--     resolved_recipe.lua in any key but those that do not change what is trained
--     (M.ignored: resume, out, log, device, memory);
--   * a folder with outputs but no resolved_recipe.lua (nothing says which run made them).
-- `trainer resume RUN_DIR [key=value ...]` (M.load) continues the folder's own run from its
-- latest checkpoint with the folder's recipe; overrides given there change the run from
-- that step on, deliberately (e.g. optim.lr after a diverged step), and are recorded.
local errors = require("trainer.core.errors")
local json = require("trainer.core.json")
local sys = require("trainer.core.sys")
local outputs = require("trainer.train.outputs")
local fs = require("trainer.core.fs")

local M = {}

M.ignored = { resume = true, out = true, log = true, device = true, memory = true, overwrite = true }

-- ---------------------------------------------------------------- command lines
-- A word as the shell reads it back: bare when it is plain, else in single quotes.
function M.shell_word(s)
  s = tostring(s)
  if s ~= "" and s:match("^[%w%._/:=,+%-@%%]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- "trainer WORD WORD ..." for a list of arguments.
function M.shell_line(args)
  local words = { "trainer" }
  for _, a in ipairs(args) do words[#words + 1] = M.shell_word(a) end
  return table.concat(words, " ")
end

-- The words of a process's command line (/proc/PID/cmdline), or nil.
local function cmdline(pid)
  local s = outputs.proc_text(pid, "cmdline")
  local words = {}
  for w in (s or ""):gmatch("([^%z]*)%z") do words[#words + 1] = w end
  return #words > 0 and words or nil
end

-- The parent of a process (the 4th field of /proc/PID/stat, after the parenthesised name).
local function parent(pid)
  local s = outputs.proc_text(pid, "stat")
  return s and s:match("%) %S+ (%d+)")
end

local LAUNCHERS = { mpirun = true, mpiexec = true, orterun = true, prterun = true }

-- Under mpirun: the launcher's own words before this program ("mpirun --allow-run-as-root
-- -np 2"), found among this process's ancestors, so that a printed resume command runs as
-- the run did; "mpirun -np N" when the launcher cannot be read (a rank on another machine).
function M.launcher_line(size)
  -- OMPI_COMMAND: the program as the launcher runs it (its file name; the launcher's word may
  -- be a path to it)
  local program = os.getenv("OMPI_COMMAND")
  program = program and program:match("[^/]*$")
  local pid = "self"
  for _ = 1, 4 do
    pid = parent(pid)
    if not pid or pid == "0" or pid == "1" then break end
    local words = cmdline(pid)
    if words and LAUNCHERS[words[1]:match("[^/]*$")] then
      local out = {}
      for i = 1, #words do
        if i > 1 and program and words[i]:match("[^/]*$") == program then
          return table.concat(out, " ")
        end
        out[#out + 1] = M.shell_word(words[i])
      end
      break
    end
  end
  return ("mpirun -np %d"):format(size)
end

-- The arguments that made a resolved recipe: { path, override, ... }.
function M.command_of(resolved)
  if resolved.command then return resolved.command end
  local cmd = { resolved.path }
  for _, o in ipairs(resolved.overrides or {}) do cmd[#cmd + 1] = o end
  return cmd
end

-- The command without its resume= overrides, then resume=ck: the long form of a resume.
function M.long_form(resolved, ck)
  local cmd = {}
  for _, a in ipairs(M.command_of(resolved)) do
    if not a:match("^resume=") then cmd[#cmd + 1] = a end
  end
  cmd[#cmd + 1] = "resume=" .. ck
  return M.shell_line(cmd)
end

-- The "-- command: [...]" line of a resolved_recipe.lua text, as a list (nil if absent).
function M.read_command(text)
  local line = text:match("\n%-%- command: (%[[^\n]*%])") or text:match("^%-%- command: (%[[^\n]*%])")
  if not line then return nil end
  local ok, v = pcall(json.decode, line, "resolved_recipe.lua")
  if ok and type(v) == "table" and type(v[1]) == "string" then return v end
  return nil
end

-- ---------------------------------------------------------------- recipes
-- The table a resolved_recipe.lua returns (its functions are nil), or nil if unreadable.
function M.stored_recipe(dir)
  -- read as a recipe is: source text only, in the sandbox's limits
  local t = require("trainer.recipe.sandbox").read_data(dir .. "/resolved_recipe.lua", { math = { huge = math.huge } })
  if type(t) == "table" then return t end
  return nil
end

-- The recipe without the keys that do not change what is trained, and without functions.
function M.identity(recipe)
  local function strip(v)
    if type(v) ~= "table" then return v end
    local out = {}
    for k, x in pairs(v) do if type(x) ~= "function" then out[k] = strip(x) end end
    return out
  end
  local out = strip(recipe)
  for k in pairs(M.ignored) do out[k] = nil end
  return out
end

-- "key: A -> B" for each key where a (the folder's) and b (the command's) differ: the
-- same lines as `trainer check --diff` (trainer.recipe.diff).
function M.differences(a, b)
  return require("trainer.recipe.diff").lines(a, b)
end

-- The differences as the indented block that ends a refusal.
local function diff_block(diffs)
  return "\nWhat differs (the folder's run -> this command):\n  " .. table.concat(diffs, "\n  ")
end

-- Whether a folder holds any output of a run.
function M.holds_outputs(dir)
  for _, f in ipairs({ "resolved_recipe.lua", "metrics.jsonl", "summary.json" }) do
    if fs.exists(dir .. "/" .. f) then return true end
  end
  return #outputs.checkpoints(dir) > 0
end

local function real(p) return sys.realpath(p) or p end

-- ---------------------------------------------------------------- the checks
-- The checkpoint folder recipe.resume names ("latest": out's last one, or a path); a user
-- error when there is none.
function M.find_checkpoint(recipe)
  local r = recipe.resume
  if r == "latest" then
    local list = outputs.checkpoints(recipe.out)
    if #list == 0 then
      errors.user("resume = \"latest\": %s holds no checkpoint-STEP folder; run without resume (resume=nil) or "
        .. "name a checkpoint folder", recipe.out)
    end
    return list[#list].dir
  end
  if not sys.is_dir(r) or not fs.exists(r .. "/trainer_state") then
    errors.user("resume = %q: not a checkpoint folder (one holds trainer_state); use \"latest\" or a path such "
      .. "as %s/checkpoint-200", r, recipe.out)
  end
  return r
end

-- Refuses (a user error, before anything is written) a resume from checkpoint folder
-- resume_dir into resolved.recipe.out when out holds another run's outputs.
function M.check_target(resolved, resume_dir)
  local out = resolved.recipe.out
  if not M.holds_outputs(out) then return end
  local ck_run = resume_dir:match("^(.*)/[^/]+/*$") or "."
  if real(ck_run) ~= real(out) then
    errors.user("resume = %q is a checkpoint of the run in %s, but out = %s holds another run's outputs, which "
      .. "resuming would overwrite; nothing was written. To continue the run in %s: trainer resume %s. To start a "
      .. "new run from that checkpoint, give it a new folder: out=runs/NEW_NAME.", resume_dir, ck_run, out, ck_run,
      M.shell_word(ck_run))
  end
  if resolved.continuing then return end
  local stored = M.stored_recipe(out)
  if not stored then
    errors.user("%s holds run outputs but no readable resolved_recipe.lua, so nothing says which run made them; "
      .. "resuming into it is refused (nothing was written). Start a new run in a new folder: out=runs/NEW_NAME.", out)
  end
  local diffs = M.differences(M.identity(stored), M.identity(resolved.recipe))
  if #diffs > 0 then
    errors.user("%s holds a run made with other settings than this command, so resuming there would mix two "
      .. "runs' outputs; nothing was written. To continue that run as it was: trainer resume %s (add key=value "
      .. "overrides to change a setting on purpose, e.g. trainer resume %s optim.lr=1e-5). To start a new run, "
      .. "give it a new folder: out=runs/NEW_NAME.%s", out, M.shell_word(out), M.shell_word(out), diff_block(diffs))
  end
end

-- A new run (no resume) into out, when out holds a run's checkpoints or summary: refused (a
-- user error, before anything is written), as the two runs' metrics, summaries and
-- checkpoints would mix and a later resume could continue the old run's checkpoint; with
-- overwrite = true the old run's files are removed first (the Hugging Face Trainer's
-- overwrite_output_dir). A folder whose run ended before its first checkpoint and summary
-- (a crash at step 2) holds nothing to continue, and the new run replaces its files.
-- Returns the earlier run's files that overwrite = true removes (the caller removes them
-- once the new run is built, so a run that cannot start loses nothing), or nil.
function M.check_new(resolved)
  local recipe = resolved.recipe
  local out = recipe.out
  local has_summary = fs.exists(out .. "/summary.json")
  if not has_summary and #outputs.checkpoints(out) == 0 then return nil end
  if recipe.overwrite then return outputs.run_files(out) end
  local ok, summary = pcall(json.read, out .. "/summary.json")
  local finished = has_summary and ok and type(summary) == "table" and not summary.stopped_by_signal
  local what = finished and "a finished run" or "an earlier run"
  local cmd = {}
  for _, a in ipairs(M.command_of(resolved)) do cmd[#cmd + 1] = a end
  cmd[#cmd + 1] = "overwrite=true"
  errors.user("%s already holds %s's outputs, and a new run there would mix the two runs' metrics and checkpoints; "
    .. "nothing was written. To continue that run: trainer resume %s. To replace it with this run (its outputs are "
    .. "removed first): %s. Or give this run its own folder: out=runs/NEW_NAME.", out, what, M.shell_word(out),
    M.shell_line(cmd))
end

local function append(list, more)
  local out = {}
  for _, x in ipairs(list) do out[#out + 1] = x end
  for _, x in ipairs(more or {}) do out[#out + 1] = x end
  return out
end

-- The resolved recipe that continues the run in run_dir from its latest checkpoint (for
-- `trainer resume RUN_DIR [key=value ...]`). Also returns the folder's summary.json
-- (or nil), so that the caller can say when the run is already complete.
function M.load(run_dir, overrides, opts)
  local recipe = require("trainer.recipe")
  overrides = overrides or {}
  run_dir = run_dir:gsub("(.)/+$", "%1")
  if not sys.is_dir(run_dir) then
    errors.user("resume: %s: no such run folder; give the out folder of a run, e.g. trainer resume runs/minilm_sts_lora",
      run_dir)
  end
  local rpath = run_dir .. "/resolved_recipe.lua"
  if not fs.exists(rpath) then
    errors.user("resume: %s is not a run folder: it has no resolved_recipe.lua (every run writes one into its out "
      .. "folder); give the folder a run wrote, e.g. trainer resume runs/minilm_sts_lora", run_dir)
  end
  local text = outputs.read(rpath)
  local command = M.read_command(text) or { rpath }
  if #outputs.checkpoints(run_dir) == 0 then
    errors.user("resume: %s holds no checkpoint-STEP folder to continue from (the run stopped before its first "
      .. "save); start it again with: %s", run_dir, M.shell_line(command))
  end
  local stored = M.stored_recipe(run_dir)
  if not stored then errors.user("resume: %s: cannot be read back as a recipe (is it damaged?)", rpath) end
  local resolved
  if text:find("--[[ function defined at", 1, true) then
    -- The recipe's functions (hooks, loop, ...) are not serialisable: they come from the
    -- recipe file that defined them, which must still give the run's recipe.
    local src = command[1] ~= rpath and recipe.load(command[1], { unpack(command, 2) }, opts)
    local diffs = src and M.differences(M.identity(stored), M.identity(src.recipe))
    if not src or #diffs > 0 then
      errors.user("resume: the run in %s has functions (hooks or loop) that resolved_recipe.lua cannot hold, so they "
        .. "are taken from %s; but that recipe no longer gives this run%s. Restore it as it was, or start a new run.%s",
        run_dir, tostring(command[1]), src and "" or " (it is not recorded)", src and diff_block(diffs) or "")
    end
    resolved = recipe.load(command[1], append({ unpack(command, 2) }, overrides), opts)
  else
    resolved = recipe.load(rpath, overrides, opts)
  end
  resolved.recipe.out = run_dir
  resolved.recipe.resume = "latest"
  resolved.continuing = true
  resolved.command = append(command, overrides)
  resolved.rewrite_recipe = #overrides > 0
  local summary
  if fs.exists(run_dir .. "/summary.json") then
    local ok, s = pcall(json.read, run_dir .. "/summary.json")
    if ok and type(s) == "table" then summary = s end
  end
  return resolved, summary
end

return M
