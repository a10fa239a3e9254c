-- scripts/run_scores.lua — what the demos' closing lines (scripts/demo_result.lua,
-- scripts/retrieval_result.lua) read from a run folder: its scores before and after training
-- and its training loss at the start and at the end. Not a script: they `dofile` it.
local json = require("trainer.core.json")
local outputs = require("trainer.train.outputs")

local M = {}

-- summary.json of the run folder dir, and its scores before and after training (its
-- eval_start and eval; {} where one is missing).
function M.summary(dir)
  local s = json.read(dir .. "/summary.json")
  return s, type(s.eval_start) == "table" and s.eval_start or {}, type(s.eval) == "table" and s.eval or {}
end

-- The training losses dir's metrics.jsonl logged, n (a tenth of their count, at least 1),
-- and, with two losses or more, the mean of the first n and the mean of the last n (single
-- batches are noisy).
function M.losses(dir)
  local losses = {}
  for _, r in ipairs(outputs.read_metrics(dir)) do
    if type(r.loss) == "number" then losses[#losses + 1] = r.loss end
  end
  local n = math.max(1, math.floor(#losses / 10))
  if #losses < 2 then return losses, n end
  local function mean(a, b)
    local sum = 0
    for i = a, b do sum = sum + losses[i] end
    return sum / (b - a + 1)
  end
  return losses, n, mean(1, n), mean(#losses - n + 1, #losses)
end

return M
