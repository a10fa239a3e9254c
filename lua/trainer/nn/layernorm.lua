-- trainer.nn.LayerNorm: over the last dim, with weight (ones) and bias (zeros) [C] (HF
-- names "weight", "bias"; the module is registered as "LayerNorm" in BERT). Statistics
-- reduce in f32; the output's dtype is the input's. Keeps x, mean and rstd.
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")

local LayerNorm = Module:extend("LayerNorm")

-- opts: eps (default 1e-12, BERT's), device, dtype (of the parameters, default f32), bias
-- (default true; false: no bias parameter, as torch's LayerNorm(bias=False)).
function LayerNorm.new(dim, opts)
  opts = opts or {}
  local self = LayerNorm:create()
  self.dim, self.eps = dim, opts.eps or 1e-12
  local o = { dtype = opts.dtype or "f32", device = opts.device, tag = "weights" }
  self:add_param("weight", T.ones({ dim }, o))
  if opts.bias ~= false then self:add_param("bias", T.zeros({ dim }, o)) end
  return self
end

function LayerNorm:forward(x)
  local y, mean, rstd = ops.layernorm(x, self.weight.value, self.bias and self.bias.value, self.eps)
  self:keep("x", x)
  self:keep_owned("mean", mean)
  self:keep_owned("rstd", rstd)
  return y
end

function LayerNorm:backward(dy)
  local s = self.saved
  local dx = ops.layernorm_backward(dy, self:saved_tensor("x"), self.weight.value, s.mean, s.rstd,
    Module.grad_of(self.weight), self.bias and Module.grad_of(self.bias))
  self:release()
  return dx
end

return LayerNorm
