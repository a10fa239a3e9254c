-- trainer.train.loop: the default training loop and the run as a whole (`trainer RECIPE.lua`).
--
--   loop.default(t)             evaluate at the start (eval.at_start, not on resume), then
--                               optimizer steps until the planned steps are done, evaluating
--                               every eval.every and saving every save.every steps; at the end
--                               (or on SIGINT/SIGTERM) an evaluation and a final checkpoint
--   loop.train(resolved, opts)  builds the run (trainer.train.run), writes resolved_recipe.lua,
--                               runs recipe.loop(t) or loop.default(t), writes summary.json;
--                               returns the exit status: 0 done, 130 stopped by a signal
--                               (after saving and printing how to resume)
-- A recipe's own loop gets the same building blocks as the default one:
--   loop = function(t)
--     while not t:done() do
--       local m = t:train_step()               -- nil when the data is exhausted
--       if not m then break end
--       if m.step % 50 == 0 then t:evaluate() end
--     end
--     t:evaluate(); t:save()
--   end
-- (recipes/custom_loop.lua is a working example).
local outputs = require("trainer.train.outputs")
local fs = require("trainer.core.fs")
local sys = require("trainer.core.sys")
local resume = require("trainer.train.resume")

local M = {}

function M.default(t)
  local r = t.recipe
  if r.eval.at_start ~= false and t.step == 0 and not t.resume_dir then t:evaluate() end
  local evaluated_at = t.step
  while not t:done() do
    local m = t:train_step()
    if not m then break end
    if r.eval.every and t.step % r.eval.every == 0 then t:evaluate() evaluated_at = t.step end
    -- (t.saved_step: a new best evaluation may have saved this step already)
    if r.save.every and t.step % r.save.every == 0 and t.saved_step ~= t.step then t:save() end
  end
  if not t.stop_signal and (evaluated_at ~= t.step or t.step == 0) then t:evaluate() end
  if (r.save.final ~= false or t.stop_signal) and t.saved_step ~= t.step then t:save() end
end

-- A score as it reads best: a whole number as one ("custom_steps 20"), else 4 decimals.
local function score_text(v)
  if type(v) ~= "number" then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%d"):format(v) end
  return ("%.4f"):format(v)
end

-- "name value, name value" of a table of scores in name order; nil when it has none.
local function scores_text(s)
  if type(s) ~= "table" then return nil end
  local keys = {}
  for k in pairs(s) do keys[#keys + 1] = k end
  if #keys == 0 then return nil end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = ("%s %s"):format(k, score_text(s[k])) end
  return table.concat(parts, ", ")
end

-- The line a finished run ends with: steps, final loss, and the evaluations that exist
-- (before and after training, or only the one there was).
function M.done_line(summary, out)
  local loss = type(summary.final_loss) == "number" and ("%.4f"):format(summary.final_loss) or "-"
  local text = ("trainer: done, %d steps, final loss %s"):format(summary.steps, loss)
  local before, after = scores_text(summary.eval_start), scores_text(summary.eval)
  if before and after then text = text .. ("; eval before: %s; after: %s"):format(before, after)
  elseif after then text = text .. ("; eval: %s"):format(after)
  elseif before then text = text .. ("; eval before training: %s"):format(before) end
  local best = summary.best
  if type(best) == "table" and best.step then
    text = text .. ("\n  best %s %s at step %d%s"):format(best.metric, score_text(best.score), best.step,
      best.folder and (", copied to " .. best.folder) or "")
  end
  if type(summary.early_stopped) == "table" then
    text = text .. ("\n  stopped early at step %d: no improvement by more than %s in %d evaluations"):format(
      summary.early_stopped.step, score_text(summary.early_stopped.threshold), summary.early_stopped.patience)
  end
  return text .. ("\n  outputs in %s (`trainer report %s` draws them)"):format(out, out)
end

-- This process's rank in an mpirun job, from the launcher's environment (before MPI starts);
-- 0 for a plain process.
local function launch_rank()
  return tonumber(os.getenv("OMPI_COMM_WORLD_RANK") or os.getenv("PMI_RANK") or "0") or 0
end

local signal_names = { [2] = "SIGINT", [15] = "SIGTERM" }

-- opts: quiet (bool), progress (a trainer.progress object, for tests).
function M.train(resolved, opts)
  opts = opts or {}
  local recipe = resolved.recipe
  local run = require("trainer.train.run")
  -- the folders this run creates: removed again when it stops before writing anything
  local created = {}
  local dir = recipe.out
  while dir and dir ~= "" and dir ~= "." and dir ~= "/" and not sys.is_dir(dir) do
    created[#created + 1] = dir
    dir = dir:match("^(.*)/[^/]*$")
  end
  outputs.mkdir(recipe.out)
  -- the folder is this run's for its whole life (trainer.outputs.lock); under mpirun rank 0
  -- alone takes the lock and checks the folder, as it alone writes there (ranks on other
  -- machines may share the folder, and would take each other's lock)
  local rank0 = launch_rank() == 0
  local lock = rank0 and outputs.lock(recipe.out) or nil
  local built, t = pcall(function()
    local old = rank0 and not recipe.resume and resume.check_new(resolved) or nil
    local t = run.build(resolved, opts)
    if old then
      for _, p in ipairs(old) do outputs.remove_tree(p) end
      outputs.sync(recipe.out)
      if not (opts.quiet or recipe.log.quiet) then
        io.stderr:write(("trainer: overwrite = true: removed the earlier run's outputs in %s\n"):format(recipe.out))
      end
    end
    return t
  end)
  if not built then
    if #created > 0 then
      os.remove(recipe.out .. "/" .. outputs.LOCK)
      for _, d in ipairs(created) do os.remove(d) end   -- each only if empty
    end
    outputs.unlock(lock)
    error(t, 0)
  end
  -- under mpirun only rank 0 prints progress and writes the run's files (trainer.dist)
  local root = t:writes_outputs()
  local ok, err = pcall(function()
    t.progress = opts.progress or require("trainer.train.progress").new({ every = recipe.log.every,
      quiet = opts.quiet or recipe.log.quiet or not root })
    -- the run's identity (trainer.train.resume): written when the run starts in its folder, kept
    -- as it is when the run continues there, rewritten when `trainer resume DIR k=v` changes it
    local rpath = recipe.out .. "/resolved_recipe.lua"
    if root and (not t.resume_dir or resolved.rewrite_recipe or not fs.exists(rpath)) then
      outputs.write_atomic(rpath, outputs.recipe_text(recipe, resolved.path, resume.command_of(resolved),
        t.fit and not t.fit.kept and require("trainer.plan.fit").comment(t.fit) or nil))
    end
    t.metrics = root and outputs.open_metrics(recipe.out, t.resume_dir and t.step or nil) or nil
    -- TensorBoard event files beside it (log.tensorboard), rank 0 only, as metrics.jsonl
    if root and recipe.log.tensorboard ~= false then
      t.tb = require("trainer.train.tensorboard").open(recipe.out, { step = t.step, resumed = t.resume_dir ~= nil,
        recipe_text = outputs.read(rpath) })
    end
    if t.resume_dir then t.progress:message(("resumed from %s at step %d"):format(t.resume_dir, t.step)) end
    -- data.skip_bad: what was skipped is said once, before the first step
    local sums = { t.train_ds:summary(), t.eval_summary }
    if sums[1].datasets then   -- several training datasets: each one's
      sums = { t.eval_summary }
      for _, p in ipairs(t.train_ds.parts) do sums[#sums + 1] = p.ds:summary() end
    end
    for _, d in pairs(sums) do
      if d.skipped and d.skipped > 0 then
        t.progress:message(("data.skip_bad: skipped %d malformed line%s of %s; the first: %s"):format(d.skipped,
          d.skipped == 1 and "" or "s", d.path, tostring(d.first_bad)))
      end
    end
    sys.watch_stop()
    if type(recipe.loop) == "function" then require("trainer.train.user_code").call("loop", recipe.loop, t)
    else M.default(t) end
    if t:stop_requested() and t.last_checkpoint == nil then t:save() end
    t:write_best()   -- save.best: out/best
    t.summary_ = t:finish()
    t.progress:finish()
  end)
  sys.unwatch_stop()
  if not ok then
    pcall(function() t:flush_metrics() end)
    if t.progress then t.progress:finish() end
    t:free()
    outputs.unlock(lock)
    error(err, 0)
  end
  local status = 0
  local summary = t.summary_
  if t.stop_signal and not root then
    status = 130
  elseif t.stop_signal then
    local ck = t.last_checkpoint
    -- under mpirun the resume runs under mpirun with the same number of ranks
    local mpi = t.dist and t.dist.size > 1 and (resume.launcher_line(t.dist.size) .. " ") or ""
    io.stderr:write(("trainer: stopped by %s after step %d; saved %s.\nResume with: %strainer resume %s\n"
      .. "  (the same as: %s%s)\n"):format(signal_names[t.stop_signal] or ("signal " .. t.stop_signal), t.step,
      tostring(ck), mpi, resume.shell_word(recipe.out), mpi, resume.long_form(resolved, ck or "latest")))
    status = 130
  elseif root and not (opts.quiet or recipe.log.quiet) then
    io.stderr:write(M.done_line(summary, recipe.out), "\n")
  end
  t:free()
  outputs.unlock(lock)
  return status, summary
end

return M
