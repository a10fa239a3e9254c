-- trainer.nn.Normalize: y = x / max(||x||_2, eps) over the last dim (sentence-transformers'
-- Normalize module, torch.nn.functional.normalize). Keeps a view of x.
local Module = require("trainer.nn.module")
local ops = require("trainer.core.ops")

local Normalize = Module:extend("Normalize")

function Normalize.new(eps)
  local self = Normalize:create()
  self.eps = eps or 1e-12
  return self
end

function Normalize:forward(x)
  local y = ops.l2norm(x, self.eps)
  self:keep("x", x)
  return y
end

function Normalize:backward(dy)
  local dx = ops.l2norm_backward(dy, self:saved_tensor("x"), self.eps)
  self:release()
  return dx
end

return Normalize
