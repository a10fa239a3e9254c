-- trainer.losses.listwise: a cross-encoder's listwise cross-entropy (the recipe's
-- loss.name = "cross_entropy" when model.task = "cross_encoder"): each query's scores over
-- its positive and its negatives, softmaxed, the positive the target —
-- sentence-transformers' cross_encoder.losses.MultipleNegativesRankingLoss over the hard
-- negatives only (no in-batch negatives) with activation_fn = None and scale = 1:
--   s_i = [x(q_i, p_i), x(q_i, n_i1), ..., x(q_i, n_ik)]
--   loss = mean_i ( logsumexp(s_i) - s_i[1] )
-- The logits arrive as one column [(1 + k) B, 1] in column blocks: the B positives' pairs,
-- then the B pairs of each negative column (trainer.train.step builds them so). They are
-- read to the host and the loss and its gradient computed there in double (one number a pair).
local errors = require("trainer.core.errors")
local base = require("trainer.losses.base")
local bce = require("trainer.losses.bce")

local Listwise = base.class()

local M = {}

function M.new()
  -- listwise: the step feeds every (query, candidate) pair of a row, not the row as one pair
  return setmetatable({ kind = "listwise_cross_entropy", listwise = true }, Listwise)
end

-- embs: the logits [(1 + k) B, 1]; labels: nil, or B numbers (ignored: the positive is the
-- first candidate); opts.queries (B) when the labels do not give it.
function Listwise:forward(embs, labels, queries)
  local x, N, logits = bce.scores("cross_entropy", embs)
  local B = queries or self.queries or (type(labels) == "table" and #labels) or nil
  if not B or B < 1 or N % B ~= 0 or N / B < 2 then
    errors.user("cross_entropy (listwise) loss: %d scores for %s queries; each query needs its positive and at "
      .. "least one negative (data.columns: query, positive, negative, ...)", N, tostring(B))
  end
  local n = N / B
  local sum, d = 0, {}
  for i = 1, B do
    local m = -math.huge
    for c = 0, n - 1 do m = math.max(m, x[c * B + i]) end
    local z = 0
    for c = 0, n - 1 do z = z + math.exp(x[c * B + i] - m) end
    local lse = m + math.log(z)
    sum = sum + lse - x[i]
    for c = 0, n - 1 do
      local p = math.exp(x[c * B + i] - lse)
      d[c * B + i] = { (p - (c == 0 and 1 or 0)) / B }
    end
  end
  return base.save_host_grad(self, d, logits:device(), sum / B)
end

Listwise.backward = base.host_grad_backward

return M
