-- trainer.losses.cosent: CoSENTLoss (sentence-transformers) on pairs (u_i, v_i) with
-- gold scores y_i:
--   s_i = scale * cos(u_i, v_i)
--   loss = log(1 + sum over pairs (i, j) with y_i > y_j of exp(s_j - s_i))
-- Tied scores add no term; the result is the same for any monotone rescaling of y.
--
-- The cosines come from one cosine_sim GEMM ([B, B], its diagonal used; B^2 C is small
-- next to the encoder). On the CPU the O(B^2) sum over scalar pairs runs on the host in
-- double; built deferred (a run on a device) it is the op cosent_loss, which takes the
-- diagonal, reduces the loss and writes the gradient on the device, so a step reads nothing
-- back. The backward feeds the diagonal dsim to the cosine_sim backward.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local base = require("trainer.losses.base")

local CoSENT = base.class()

local M = {}

function M.new(spec)
  return setmetatable({ kind = "cosent", scale = spec.scale }, CoSENT)
end

function CoSENT:forward(embs, labels)
  local B
  local _
  B, _, embs = base.check_embeddings("cosent", embs, 2, 2)
  local y = base.host_labels("cosent", labels, B)
  -- on a device: the diagonal, the loss and its gradient there (ops.cosent_loss)
  if self.deferred then return base.score_loss_on_device(self, ops.cosent_loss, y, self.scale, embs) end
  local cos = T.scope(function() return base.diagonal(ops.cosine_sim(embs[1], embs[2]), B) end)
  local s = {}
  for i = 1, B do s[i] = self.scale * cos[i] end
  -- terms: 0 (the "1 +") and s_j - s_i for y_i > y_j; log-sum-exp shifted by the max
  local pi, pj, d, m = {}, {}, {}, 0
  for i = 1, B do
    for j = 1, B do
      if y[i] > y[j] then
        local t = s[j] - s[i]
        pi[#pi + 1], pj[#pj + 1], d[#d + 1] = i, j, t
        if t > m then m = t end
      end
    end
  end
  local z = math.exp(-m)
  for k = 1, #d do z = z + math.exp(d[k] - m) end
  local loss = m + math.log(z)
  -- d loss / d s: pair k has softmax weight w = exp(d_k - loss); d_k = s_j - s_i
  local ds = {}
  for i = 1, B do ds[i] = 0 end
  for k = 1, #d do
    local w = math.exp(d[k] - loss)
    ds[pj[k]] = ds[pj[k]] + w
    ds[pi[k]] = ds[pi[k]] - w
  end
  self:save({}, { u = embs[1], v = embs[2], ds = ds })
  return loss
end

function CoSENT:backward()
  local s, o = self:saved(), self._owned
  local grads = T.scope(function()
    local dsim = o.dsim
    if not dsim then
      local dcos = {}
      for i, g in ipairs(s.ds) do dcos[i] = self.scale * g end
      dsim = base.diag_tensor(dcos, s.u:device())
    end
    return { ops.cosine_sim_backward(dsim, s.u, s.v) }
  end)
  self:release()
  return grads
end

return M
