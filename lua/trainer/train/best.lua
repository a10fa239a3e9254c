-- trainer.train.best: the best checkpoint and early stopping, by the metric eval.primary
-- names (Hugging Face's metric_for_best_model, load_best_model_at_end and
-- EarlyStoppingCallback).
--
-- After each evaluation during training (step > 0; the evaluation before training is the
-- baseline and not a candidate), t:track_best(scores):
--   * a score better than the best so far (eval.greater_is_better; default: higher is
--     better unless the metric's name holds "loss") makes it the best: t.best = { metric,
--     score, step }. With save.best the run saves a checkpoint at that step (unless it has one)
--     and keeps it: save.keep never prunes it (t.best.checkpoint).
--   * early_stopping = { patience = N, threshold = x }: an evaluation that does not beat the
--     best so far by more than threshold counts against the patience; N such evaluations in a
--     row end the run (t.early_stop, said in the progress output and summary.json).
-- At the end, t:write_best() copies the best checkpoint to out/best (built in best.tmp/,
-- then renamed), and summary.json's best says its step, score and metric.
local errors = require("trainer.core.errors")
local sys = require("trainer.core.sys")
local outputs = require("trainer.train.outputs")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

local function greater_is_better(recipe)
  local g = recipe.eval.greater_is_better
  if g == nil then return not recipe.eval.primary:lower():find("loss", 1, true) end
  return g
end

-- Whether a beats b by more than threshold in the metric's direction.
local function beats(a, b, greater, threshold)
  if b == nil then return true end
  if greater then return a > b and a - b > threshold end
  return a < b and b - a > threshold
end

-- save.best and early_stopping need eval.primary; under mpirun they are not supported yet
-- (rank 0 alone evaluates, and the ranks would not agree to stop).
function Run:check_best()
  local r = self.recipe
  local wants = r.save.best and "save.best" or (r.early_stopping and "early_stopping")
  if not wants then return end
  if not r.eval.primary then
    errors.user("%s needs eval.primary: the metric that decides, e.g. eval.primary = \"dev_cosine_ndcg@10\"", wants)
  end
  if self.dist and self.dist.size > 1 then
    errors.user("%s is not supported under mpirun yet (rank 0 alone evaluates); run it in one process", wants)
  end
end

function Run:track_best(scores)
  local recipe = self.recipe
  local primary = recipe.eval.primary
  if not primary or self.step == 0 then return end
  local v = scores[primary]
  if type(v) ~= "number" or v ~= v then return end
  local greater = greater_is_better(recipe)
  local prev = self.best and self.best.score
  local es = recipe.early_stopping
  if es then
    if beats(v, prev, greater, es.threshold or 0) then self.patience_used = 0
    else self.patience_used = (self.patience_used or 0) + 1 end
  end
  if beats(v, prev, greater, 0) then
    self.best = { metric = primary, score = v, step = self.step }
    if recipe.save.best then
      -- named before the save, so that the checkpoint's own trainer_state knows it is the best
      -- (a run resumed from it keeps protecting it)
      self.best.checkpoint = ("%s/checkpoint-%d"):format(self.out, self.step)
      if self.saved_step ~= self.step then self:save() end
    end
  end
  if es and self.patience_used >= es.patience and not self.early_stop then
    self.early_stop = { step = self.step, patience = es.patience, threshold = es.threshold or 0,
                        best_step = self.best and self.best.step, best_score = self.best and self.best.score }
    if self.progress then
      self.progress:message(("early stopping: %s has not improved by more than %g for %d evaluation%s (best %.6g at "
        .. "step %d); stopping at step %d"):format(primary, es.threshold or 0, es.patience, es.patience == 1 and "" or "s",
        self.best.score, self.best.step, self.step))
    end
  end
end

-- The checkpoint save.keep must not prune (the best one), or nil.
function Run:protected_checkpoint()
  return self.best and self.best.checkpoint
end

-- Copies the folder src (files and sub-folders) into dst.
local function copy_tree(src, dst)
  outputs.mkdir(dst)
  for _, name in ipairs(sys.list_dir(src) or {}) do
    local s, d = src .. "/" .. name, dst .. "/" .. name
    if sys.is_dir(s) then copy_tree(s, d) else outputs.copy_file(s, d) end
  end
  outputs.sync(dst)
end

-- out/best: a copy of the best checkpoint (save.best), written at the end of the run.
function Run:write_best()
  if not self.recipe.save.best or not self:writes_outputs() then return end
  local ck = self.best and self.best.checkpoint
  if not ck then return end
  if not sys.is_dir(ck) then
    errors.user("save.best: the best checkpoint %s is gone; it cannot be copied to %s/best", ck, self.out)
  end
  local dst = self.out .. "/best"
  outputs.build_folder(dst, "the best checkpoint", function(tmp) copy_tree(ck, tmp) end)
  self.best.folder = dst
end

return Run
