-- trainer.train.run: a training run built from a resolved recipe — the object `t` that the
-- default loop (trainer.loop) and a recipe's own `loop = function(t) ... end` drive.
--
--   local t = run.build(resolved)      -- resolved: what recipe.load returns
--   t:train_step()   -> metrics or nil (data exhausted)   one optimizer step (all micro-batches)
--   t:evaluate()     -> scores (spearman/pearson, accuracy, or eval.fn's)  (also on_eval)
--   t:save()         -> folder (checkpoint-STEP, atomic, keeps the last save.keep; on_save)
--   t:done()         -> true when the planned steps are done or a stop was requested
--   t:finish()       writes summary.json; t:free()
--   t.step, t.total_steps, t.epoch, t.model, t.tokenizer, t.loss, t.optimizer, t.schedule,
--   t.recipe, t.out, t.last_loss, t.last_eval
--
-- Order of construction (the wave's contract): model (recipe.model), lora.apply,
-- amp.prepare, checkpoint.apply, optimizer, schedule, data; then resume restores weights,
-- optimizer state, scaler, RNG counter and data cursor from a checkpoint so that the run
-- continues bit-identically (fp32 on the CPU).
-- The dropout RNG counter (model.rng.step) is the number of micro-batches done: a resumed
-- run draws the same masks as an unbroken one. Failures raise trainer.errors user errors;
-- a non-finite loss raises one naming the step and the last good checkpoint.
-- Host reads: on a device (or with opts.lazy_scalars) the losses return
-- trainer.train.deferred values and a step never waits for the device to know its loss: the
-- values are read once per logged step (log.every, the first and the last step), before an
-- evaluation, a save, an on_step hook and the summary (read_scalars), and the non-finite check
-- runs there, naming the step it happened at. metrics.jsonl gets the same rows (written once
-- their loss is known). On the CPU the losses return numbers and every step reads at once.
-- The optimizer update on a device reads nothing either (device_update: the clip norm is a
-- deferred value checked at the same reads, the found-inf flag stays on the device and the
-- optimizer skips on it; under fp16 the loss scale's update reads it there too).
-- The batches go to a device through trainer.train.batch_feed (pinned slots, a copy stream,
-- the compute stream waiting on an event: tokenising batch n + 1 overlaps the GPU's batch
-- n); on the CPU only with opts.batch_feed (its stand-in, for tests), which changes no value.
--
-- This file is the run object `t`. Its methods live in the files of their job, gathered here:
--   trainer.train.build             run.build: the run from a resolved recipe
--   trainer.train.train_step        t:train_step(): micro-batches, accumulation, the update
--   trainer.train.dist_step         the step's parts under mpirun
--   trainer.train.step_reads        the device's values read at the logged steps; metrics rows
--   trainer.train.run_evaluate      t:evaluate()
--   trainer.train.checkpoint_files  t:save(), and a resume's restore
--   trainer.train.summary           t:finish(): summary.json
-- trainer.train.loop is the loop that drives them.
local sys = require("trainer.core.sys")
local build = require("trainer.train.build")

local M = {}

local Run = {}
Run.__index = Run
M.Run = Run

for _, part in ipairs({ "trainer.train.train_step", "trainer.train.dist_step", "trainer.train.step_reads",
    "trainer.train.run_evaluate", "trainer.train.checkpoint_files", "trainer.train.summary",
    "trainer.train.best" }) do
  for name, method in pairs(require(part)) do
    assert(Run[name] == nil, name .. " is a method of two parts of the run")
    Run[name] = method
  end
end

-- Seconds on the monotonic clock, for tokens/s and ETA.
M.now = sys.now
M.find_resume = require("trainer.train.resume").find_checkpoint

-- The run of a resolved recipe (what trainer.recipe.load returns); opts: quiet, lazy_scalars
-- and batch_feed (a device's deferred reads and batch feed on the CPU), scaler (the fp16
-- scaler's options), for tests.
function M.build(resolved, opts) return build.run(resolved, opts, Run) end

-- ---------------------------------------------------------------- hooks
-- Calls hooks[name](self, ...): an error inside it is the recipe's (trainer.train.user_code).
function Run:call_hook(name, ...)
  return require("trainer.train.user_code").call("hooks." .. name, self.hooks[name], self, ...)
end

-- ---------------------------------------------------------------- end
function Run:done()
  return self.step >= self.total_steps or self.early_stop ~= nil or self:stop_requested()
end

function Run:stop_requested()
  if self.stop_signal then return true end
  if self.dist then return false end   -- under mpirun: only the signal all ranks agreed on (dist_reduce)
  local sig = sys.stop_requested()
  if sig then self.stop_signal = sig end
  return sig and true or false
end

-- Whether this process writes the run's files (only rank 0 under mpirun).
function Run:writes_outputs()
  return not self.dist or self.dist:is_root()
end

function Run:free()
  self:free_unread()
  if self.scaler and self.scaler.free then self.scaler:free() end
  if self.found_flag then self.found_flag:free() self.found_flag = nil end
  if self.metrics then self.metrics:close(true) end
  if self.tb then self.tb:close() end
  if self.loader then self.loader:close() end
  if self.train_ds then self.train_ds:close() end
  if self.optimizer then self.optimizer:free() end
  if self.loss then self.loss:free() end
  for _, l in pairs(self.losses or {}) do l:free() end
  if self.model then self.model:free() end
  if self.tokenizer then self.tokenizer:free() end
  if self.feed then self.feed:free() self.feed = nil end
end

return M
