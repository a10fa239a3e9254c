-- trainer.nn.Embedding: out[..., C] = weight[ids[...], :]. Parameter weight [V, C]. The
-- output's dtype is opts.dtype (the model's activation dtype) or the weight's. The
-- backward scatters into weight's grad (rows equal to padding_idx get nothing, as
-- PyTorch's padding_idx) and returns nil: integer ids have no gradient.
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")

local Embedding = Module:extend("Embedding")

-- opts: padding_idx, device, dtype (of the table, default f32), activation_dtype.
function Embedding.new(num, dim, opts)
  opts = opts or {}
  local self = Embedding:create()
  self.num, self.dim, self.padding_idx = num, dim, opts.padding_idx
  self.activation_dtype = opts.activation_dtype
  self:add_param("weight", T.zeros({ num, dim }, { dtype = opts.dtype or "f32", device = opts.device, tag = "weights" }))
  return self
end

function Embedding:forward(ids)
  local out = ops.embedding(ids, self.weight.value, { dtype = self.activation_dtype })
  if self.weight.trainable then self:keep("ids", ids) end
  return out
end

function Embedding:backward(dout)
  local g = Module.grad_of(self.weight)
  if g then ops.embedding_backward(g, dout, self:saved_tensor("ids"), self.padding_idx or -1) end
  self:release()
  return nil
end

return Embedding
