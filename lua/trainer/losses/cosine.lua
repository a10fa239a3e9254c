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
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local base = require("trainer.losses.base")

local Cosine = base.class()

local M = {}

function M.new(spec)
  return setmetatable({ kind = "cosine", score_scale = spec.score_scale }, Cosine)
end

function Cosine:forward(embs, labels)
  local B
  local _
  B, _, embs = base.check_embeddings("cosine", embs, 2, 2)
  local y = base.host_labels("cosine", labels, B)
  -- on a device: the diagonal, the loss and its gradient there (ops.cosine_mse_loss)
  if self.deferred then return base.score_loss_on_device(self, ops.cosine_mse_loss, y, self.score_scale, embs) end
  local cos = T.scope(function() return base.diagonal(ops.cosine_sim(embs[1], embs[2]), B) end)
  local loss, dcos = 0, {}
  for i = 1, B do
    local r = cos[i] - y[i] / self.score_scale
    loss = loss + r * r
    dcos[i] = 2 * r / B
  end
  self:save({}, { u = embs[1], v = embs[2], dcos = dcos })
  return loss / B
end

function Cosine:backward()
  local s, o = self:saved(), self._owned
  local grads = T.scope(function()
    return { ops.cosine_sim_backward(o.dsim or base.diag_tensor(s.dcos, s.u:device()), s.u, s.v) }
  end)
  self:release()
  return grads
end

return M
