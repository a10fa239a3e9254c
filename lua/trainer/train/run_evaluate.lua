-- trainer.train.run_evaluate: a run's evaluation, t:evaluate(): eval.fn(t) when the recipe
-- has one, else the eval data through the model in eval mode to the evaluators of
-- trainer.train.evaluate (STS correlations for embedding models, NLI accuracy for
-- classifiers) or trainer.train.rerank (a cross-encoder's MAP, MRR@10, NDCG@10); the scores are recorded (summary.json's eval, the step's metrics row,
-- TensorBoard) and handed to on_eval. Under mpirun rank 0 alone evaluates.
local errors = require("trainer.core.errors")

local Run = {}   -- methods of the run (trainer.train.run gathers them)

local function runtime_of() return require("trainer.core.runtime") end

-- An evaluation batch's tensors on the run's device: through the batch feed on a device
-- (uploads that do not wait for the device, as a training batch's), else tok:batch. Returns
-- the batch and the function that ends it (after the forward is queued).
-- eopts.prompt: the prompt the texts begin with (left out of the pooling where the model's
-- pooling config says include_prompt false).
local function eval_batch(self, texts, eopts)
  local tk = require("trainer.core.tokenizer")
  local pl = eopts and eopts.prompt and
    require("trainer.models.prompts").pool_length(self.model, self.tokenizer, eopts.prompt) or 0
  if self.feed then
    local enc = require("trainer.train.step").encode({ feed = self.feed, model = self.model, tokenizer = self.tokenizer },
      texts, { max_length = self.max_length, prompt_length = pl })
    return enc, function() tk.free_batch(enc) self.feed:release() end
  end
  local b = self.tokenizer:batch(texts, { max_length = self.max_length, device = self.device, prompt_length = pl })
  return b, function() tk.free_batch(b) end
end

-- The model's output for evaluation texts; the batch ends (tensors freed, feed slot
-- released) once the forward is queued, also when it fails.
local function eval_forward(self, texts, eopts)
  local b, done = eval_batch(self, texts, eopts)
  local ok, out = pcall(self.model.forward, self.model, b)
  done()
  if not ok then error(out, 0) end
  return out
end

-- The scores of the model in eval mode (self: the run, or `trainer eval`'s context with
-- recipe, model, tokenizer, max_length, device, eval_rows, eval_sets and an optional feed):
-- eval.fn(self) if given, else STS (embedding models: Spearman and Pearson of cosine vs gold)
-- or NLI accuracy (classifiers) on data.eval, and eval.sets' metrics; nil when there is no
-- evaluation. The model is back in train mode after.
function Run:eval_scores()
  local recipe = self.recipe
  local evaluate = require("trainer.train.evaluate")
  local scores
  self.model:eval()
  local ok, err = pcall(function()
    if recipe.eval.fn then
      scores = evaluate.custom(recipe.eval.fn, self)
    elseif self.eval_rows and #self.eval_rows > 0 then
      local pairs_, gold = {}, {}
      for i, r in ipairs(self.eval_rows) do
        if type(r[#r]) ~= "number" then
          errors.user("%s: row %d has no numeric score or label in its last column; set data.eval_columns",
            recipe.data.eval, i)
        end
      end
      -- pairs sorted by length (stable): batches of similar lengths pad less; correlations
      -- and accuracy do not depend on the order of the pairs
      local order = {}
      for i = 1, #self.eval_rows do order[i] = i end
      local function len(i) local r = self.eval_rows[i] return #r[1] + #r[2] end
      table.sort(order, function(a, b)
        local la, lb = len(a), len(b)
        if la ~= lb then return la < lb end
        return a < b
      end)
      for k, i in ipairs(order) do
        local r = self.eval_rows[i]
        pairs_[k], gold[k] = { r[1], r[2] }, r[#r]
      end
      local opts = { batch_size = recipe.eval.batch_size }
      if self.model.cross_encoder then
        -- the rows in file order, grouped by query: trainer.train.rerank.samples_of_rows
        local rerank = require("trainer.train.rerank")
        scores = rerank.evaluate(function(all)
          local out = {}
          for first = 1, #all, opts.batch_size do
            local chunk = {}
            for i = first, math.min(first + opts.batch_size - 1, #all) do chunk[#chunk + 1] = all[i] end
            local logits = eval_forward(self, chunk)
            for _, v in ipairs(logits:values()) do out[#out + 1] = v end
            logits:free()
          end
          return out
        end, rerank.samples_of_rows(self.eval_rows, recipe.loss.score_scale / 2))
      elseif self.model.task == "classification" then
        scores = evaluate.nli(function(batch) return eval_forward(self, batch) end, pairs_, gold, opts)
      else
        scores = evaluate.sts(function(texts) return eval_forward(self, texts) end, pairs_, gold, opts)
      end
      scores.n = nil
    end
    if self.eval_sets then
      -- eval.sets: each evaluator's metrics under name_metric, with data.eval's (if any)
      local classifier = self.model.task == "classification"
      local forward = function(texts, eopts) return eval_forward(self, texts, eopts) end
      local set_scores = require("trainer.train.eval_sets").run(self.eval_sets, not classifier and forward or nil,
        classifier and forward or nil, { batch_size = recipe.eval.batch_size, model = self.model })
      scores = scores or {}
      for k, v in pairs(set_scores) do scores[k] = v end
    end
  end)
  self.model:train()
  if not ok then error(err, 0) end
  -- the evaluation's batches may have held a bad token id: their check, read now
  runtime_of().check_device_errors(self.device)
  return scores
end

-- Evaluates the current model (t:eval_scores()) and records the scores: summary.json's
-- eval, the step's metrics row, TensorBoard, the progress line, on_eval, the best checkpoint.
function Run:evaluate()
  self:read_scalars()
  if not self:writes_outputs() then return nil end   -- under mpirun: once, on rank 0
  local recipe = self.recipe
  local scores = self:eval_scores()
  if not scores then return nil end
  local primary = recipe.eval.primary
  if primary and scores[primary] == nil then
    local names = {}
    for k in pairs(scores) do names[#names + 1] = k end
    table.sort(names)
    errors.user("eval.primary = %q is not a metric of this run's evaluation%s; it has: %s", primary,
      require("trainer.recipe.suggest").hint(primary, names), table.concat(names, ", "))
  end
  self.last_eval = scores
  self.evals[#self.evals + 1] = { step = self.step, scores = scores }
  if self.step == 0 then self.first_eval = scores end
  if self.tb then self.tb:eval(self.step, scores) end
  if self.pending and self.pending.step == self.step then self.pending.eval = scores end
  if self.progress then self.progress:eval(self, scores) end
  self:track_best(scores)   -- eval.primary: the best checkpoint, early stopping (trainer.train.best)
  if self.hooks.on_eval then self:call_hook("on_eval", scores) end
  return scores
end

return Run
