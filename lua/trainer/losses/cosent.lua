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
local ops = require("trainer.core.ops")
local base = require("trainer.losses.base")

local CoSENT = base.class()

local M = {}

function M.new(spec)
  return setmetatable({ kind = "cosent", scale = spec.scale }, CoSENT)
end

-- The loss and d loss / d cos_i (= scale * d loss / d s_i) on the host, in double (on a
-- device ops.cosent_loss computes both there).
local function host_loss(scale, cos, y)
  local B = #cos
  local s = {}
  for i = 1, B do s[i] = scale * cos[i] end
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
  local dcos = {}
  for i = 1, B do dcos[i] = scale * ds[i] end
  return loss, dcos
end

M.host_loss = host_loss   -- also AnglE's (trainer.losses.angle), over its own similarity

function CoSENT:forward(embs, labels)
  return base.pair_score_forward(self, embs, labels, ops.cosent_loss, self.scale,
    function(cos, y) return host_loss(self.scale, cos, y) end)
end

CoSENT.backward = base.pair_score_backward

return M
