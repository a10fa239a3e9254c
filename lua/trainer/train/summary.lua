-- trainer.train.summary: a run's final figures, t:finish() -> summary.json: steps, the last loss,
-- tokens/s, the run's memory peaks (the maximum over its steps and over the parts of a resumed
-- run, as its checkpoints record them) and wall time, evaluation scores, the data read.
local json = require("trainer.core.json")
local memory = require("trainer.core.memory")
local outputs = require("trainer.train.outputs")
local sys = require("trainer.core.sys")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

-- Folds peaks into the run's peaks (self.peaks): an allocator snapshot's (peak_allocated,
-- peak_reserved, peak_by_tag), or a checkpoint's record of the run's (allocated, reserved,
-- by_tag).
function Run:merge_peaks(s)
  local p = self.peaks or { allocated = 0, reserved = 0, by_tag = {} }
  self.peaks = p
  p.allocated = math.max(p.allocated, s.peak_allocated or s.allocated)
  p.reserved = math.max(p.reserved, s.peak_reserved or s.reserved)
  local by_tag = s.peak_by_tag or s.by_tag
  for _, tag in ipairs(memory.tags) do p.by_tag[tag] = math.max(p.by_tag[tag] or 0, by_tag[tag] or 0) end
end

-- Seconds of wall time of the whole run: this process's since it was built, plus those of
-- the parts before it up to the checkpoint it resumed from.
function Run:wall_time()
  return self.wall_before + (sys.now() - self.started)
end

-- summary.json: the final figures.
function Run:summary()
  self:sync_scaler()
  self:merge_peaks(memory.stats(self.device))
  local s = { peak_allocated = self.peaks.allocated, peak_reserved = self.peaks.reserved }
  local peak_by_tag = {}
  for _, tag in ipairs(memory.tags) do peak_by_tag[tag] = self.peaks.by_tag[tag] or 0 end
  return {
    steps = self.step, total_steps = self.total_steps, final_loss = self.last_loss or json.null,
    tokens_per_s = self.train_time > 0 and self.tokens / self.train_time or 0, tokens = self.tokens,
    train_time_s = self.train_time, wall_time_s = self:wall_time(),
    peak_allocated = s.peak_allocated, peak_reserved = s.peak_reserved, peak_by_tag = peak_by_tag,
    eval = self.last_eval or {}, eval_start = self.first_eval, epoch = self:epochs_done(),
    skipped_steps = self.scaler.skipped or 0, precision = self.recipe.precision, device = self.device,
    data = self.train_ds:summary(), eval_data = self.eval_summary,
    eval_sets = self.eval_sets and require("trainer.train.eval_sets").summaries(self.eval_sets) or nil,
    resumed_from = self.resumed_from, last_checkpoint = self.last_checkpoint,
    stopped_by_signal = self.stop_signal and true or nil, best = self.best, early_stopped = self.early_stop,
    distributed = self.dist and self.dist:summary(s.peak_allocated, s.peak_reserved) or nil,
    -- what batch.size = "auto" / memory.fit chose (trainer.plan.fit); a resume keeps the record
    fit = self.fit and (self.fit.kept and self.fit.summary or (not self.fit.kept and #self.fit.changes > 0
      and require("trainer.plan.fit").summary(self.fit))) or nil,
  }
end

function Run:finish()
  self:read_scalars()
  self:flush_metrics()
  if self.metrics then self.metrics:close() end   -- checked: a failed close is a failed write
  if self.tb then self.tb:close() end
  local s = self:summary()
  if not self:writes_outputs() then return s end
  outputs.write_atomic(self.out .. "/summary.json", json.encode(s, 2) .. "\n")
  return s
end

return Run
