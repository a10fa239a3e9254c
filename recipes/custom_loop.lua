-- recipes/custom_loop.lua — a recipe that writes its own training loop. `loop(t)` replaces
-- the default loop and gets the same building blocks (see README, "Custom training loops"):
--   t:train_step()  one optimizer step over batch.accumulate micro-batches -> metrics or nil
--   t:evaluate()    the recipe's evaluation (STS Spearman/Pearson here) -> scores
--   t:save()        an atomic checkpoint-STEP/ folder (resumable)
--   t:done()        planned steps done, or SIGINT/SIGTERM asked to stop
--   t.step, t.total_steps, t.last_loss, t.optimizer, t.model, ...
-- This one evaluates only when the loss has improved on its best so far by 5 %, keeps
-- a count it reports in summary.json's eval, and saves at the end.
return {
  extends = "minilm_sts_lora.lua",
  name = "custom_loop",
  steps = 40,
  out = "runs/custom_loop",
  loop = function(t)
    local best, evaluations = math.huge, 0
    t:evaluate()
    while not t:done() do
      local m = t:train_step()
      if not m then break end
      if m.loss < best * 0.95 then
        best = m.loss
        t:evaluate()
        evaluations = evaluations + 1
      end
    end
    local scores = t:evaluate() or {}
    scores.custom_evaluations = evaluations
    scores.custom_steps = t.step
    t.last_eval = scores
    t:save()
  end,
}
