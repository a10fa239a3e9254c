-- trainer.train.loop: the default training loop and the run as a whole (`trainer RECIPE.lua`).
--
--   loop.default(t)             evaluate at the start (eval.at_start, not on resume), then
--                               optimizer steps until the planned steps are done, evaluating
--                               every eval.every and saving every save.every steps; at the end
--                               (or on SIGINT/SIGTERM) an evaluation and a final checkpoint
--   loop.train(resolved, opts)  builds the run (trainer.run), writes resolved_recipe.lua,
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
local native = require("trainer.native")
local resume = require("trainer.train.resume")

local M = {}

function M.default(t)
  local r = t.recipe
  if r.eval.at_start ~= false and t.step == 0 and not t.resume_dir then t:evaluate() end
  local evaluated_at, saved_at = t.step, nil
  while not t:done() do
    local m = t:train_step()
    if not m then break end
    if r.eval.every and t.step % r.eval.every == 0 then t:evaluate() evaluated_at = t.step end
    if r.save.every and t.step % r.save.every == 0 then t:save() saved_at = t.step end
  end
  if not t.stop_signal and (evaluated_at ~= t.step or t.step == 0) then t:evaluate() end
  if (r.save.final ~= false or t.stop_signal) and saved_at ~= t.step then t:save() end
end

local signal_names = { [2] = "SIGINT", [15] = "SIGTERM" }

-- opts: quiet (bool), progress (a trainer.progress object, for tests).
function M.train(resolved, opts)
  opts = opts or {}
  local recipe = resolved.recipe
  local run = require("trainer.train.run")
  outputs.mkdir(recipe.out)
  local t = run.build(resolved, opts)
  -- under mpirun only rank 0 prints progress and writes the run's files (trainer.dist)
  local root = t:writes_outputs()
  local ok, err = pcall(function()
    t.progress = opts.progress or require("trainer.train.progress").new({ every = recipe.log.every,
      quiet = opts.quiet or recipe.log.quiet or not root })
    -- the run's identity (trainer.resume): written when the run starts in its folder, kept
    -- as it is when the run continues there, rewritten when `trainer resume DIR k=v` changes it
    local rpath = recipe.out .. "/resolved_recipe.lua"
    if not t.resume_dir and root then
      local old = outputs.checkpoints(recipe.out)
      if #old > 0 then
        io.stderr:write(("warning: %s already holds %s from an earlier run; this run replaces metrics.jsonl and "
          .. "summary.json, and a later `trainer resume %s` continues from the newest checkpoint, which may be the "
          .. "earlier run's: give each run its own out folder"):format(recipe.out, old[#old].dir:match("[^/]+$"),
          recipe.out), "\n")
      end
    end
    if root and (not t.resume_dir or resolved.rewrite_recipe or not outputs.exists(rpath)) then
      outputs.write_atomic(rpath, outputs.recipe_text(recipe, resolved.path, resume.command_of(resolved)))
    end
    t.metrics = root and outputs.open_metrics(recipe.out, t.resume_dir and t.step or nil) or nil
    -- TensorBoard event files beside it (log.tensorboard), rank 0 only, as metrics.jsonl
    if root and recipe.log.tensorboard ~= false then
      t.tb = require("trainer.train.tensorboard").open(recipe.out, { step = t.step, resumed = t.resume_dir ~= nil,
        recipe_text = outputs.read(rpath) })
    end
    if t.resume_dir then t.progress:message(("resumed from %s at step %d"):format(t.resume_dir, t.step)) end
    if native.watch_stop then native.watch_stop() end
    if type(recipe.loop) == "function" then require("trainer.train.user_code").call("loop", recipe.loop, t)
    else M.default(t) end
    if t:stop_requested() and t.last_checkpoint == nil then t:save() end
    t.summary_ = t:finish()
    t.progress:finish()
  end)
  if native.unwatch_stop then native.unwatch_stop() end
  if not ok then
    pcall(function() t:flush_metrics() end)
    if t.progress then t.progress:finish() end
    t:free()
    error(err, 0)
  end
  local status = 0
  local summary = t.summary_
  if t.stop_signal and not root then
    status = 130
  elseif t.stop_signal then
    local ck = t.last_checkpoint
    -- under mpirun the resume runs under mpirun with the same number of ranks
    local mpi = t.dist and t.dist.size > 1 and ("mpirun -np %d "):format(t.dist.size) or ""
    io.stderr:write(("trainer: stopped by %s after step %d; saved %s.\nResume with: %strainer resume %s\n"
      .. "  (the same as: %s%s)\n"):format(signal_names[t.stop_signal] or ("signal " .. t.stop_signal), t.step,
      tostring(ck), mpi, resume.shell_word(recipe.out), mpi, resume.long_form(resolved, ck or "latest")))
    status = 130
  elseif root and not (opts.quiet or recipe.log.quiet) then
    local function fmt(s)
      if not s then return "-" end
      local keys = {}
      for k in pairs(s) do keys[#keys + 1] = k end
      table.sort(keys)
      local parts = {}
      for _, k in ipairs(keys) do parts[#parts + 1] = ("%s %.4f"):format(k, s[k]) end
      return table.concat(parts, ", ")
    end
    io.stderr:write(("trainer: done, %d steps, final loss %s; eval before: %s; after: %s\n  outputs in %s "
      .. "(`trainer report %s` draws them)\n"):format(summary.steps, tostring(summary.final_loss),
      fmt(summary.eval_start), fmt(summary.eval), recipe.out, recipe.out))
  end
  t:free()
  return status, summary
end

return M
