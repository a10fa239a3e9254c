-- trainer.losses.cosine: CosineSimilarityLoss (sentence-transformers): the mean squared
-- error between cos(u_i, v_i) and the gold score y_i / score_scale.
--
-- sentence-transformers expects scores already in [0, 1] (its STS examples divide 0-5
-- scores by 5 when reading the data). score_scale (default 1) does that division here:
-- with the 0-5 STS data of the recipes, set loss = { name = "cosine", score_scale = 5 }.
-- The cosines come from one cosine_sim GEMM (diagonal used), as in cosent.lua. On the CPU the
-- loss is computed on the host in double; built deferred (a run on a device) it is the op
-- cosine_mse_loss, which takes the diagonal, reduces the loss and writes the gradient on the
-- device, so a step reads nothing back.
local ops = require("trainer.core.ops")
local base = require("trainer.losses.base")

local Cosine = base.class()

local M = {}

function M.new(spec)
  return setmetatable({ kind = "cosine", score_scale = spec.score_scale }, Cosine)
end

-- On the host: the mean squared error and d loss / d cos_i, in double (on a device
-- ops.cosine_mse_loss computes both there).
function Cosine:forward(embs, labels)
  return base.pair_score_forward(self, embs, labels, ops.cosine_mse_loss, self.score_scale, function(cos, y)
    local B = #cos
    local loss, dcos = 0, {}
    for i = 1, B do
      local r = cos[i] - y[i] / self.score_scale
      loss = loss + r * r
      dcos[i] = 2 * r / B
    end
    return loss / B, dcos
  end)
end

Cosine.backward = base.pair_score_backward

return M
