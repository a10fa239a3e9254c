-- trainer.nn.Pooling: sentence-transformers' pooling of token states into one vector per
-- sequence, honouring the attention mask: "mean", "cls", "max" or "mean_sqrt_len".
-- forward(hidden [B, T, C], mask [B, T] or nil) -> [B, C]; keeps views of both.
local Module = require("trainer.nn.module")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

local Pooling = Module:extend("Pooling")

function Pooling.new(mode)
  mode = mode or "mean"
  if not ops.pool_modes[mode] then
    errors.user("unknown pooling %q: use mean, cls, max or mean_sqrt_len", tostring(mode))
  end
  local self = Pooling:create()
  self.mode = mode
  return self
end

function Pooling:forward(hidden, mask)
  local y = ops.pool(hidden, mask, self.mode)
  self:keep("hidden", hidden)
  if mask then self:keep("mask", mask) end
  return y
end

function Pooling:backward(dy)
  local dh = ops.pool_backward(dy, self:saved_tensor("hidden"), self.saved.mask, self.mode)
  self:release()
  return dh
end

return Pooling
