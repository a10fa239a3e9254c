-- trainer.nn.Linear: y[..., out] = x[..., in] W^T + b. Parameters weight [out, in] and bias
-- [out] (HF names "weight", "bias"). The output's dtype is the input's (bf16 activations
-- flow through f32 weights). Keeps a view of x for the backward only when the weight is
-- trainable (x serves dW alone: a frozen layer keeps nothing); dx always flows (input
-- gradients pass through frozen layers), dW and db accumulate only when trainable.
-- A LoRA module can wrap it: it reads self.weight / self.bias and calls forward/backward.
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")

local Linear = Module:extend("Linear")

-- opts: bias (default true), device, dtype (of the weights, default f32).
function Linear.new(in_features, out_features, opts)
  opts = opts or {}
  local self = Linear:create()
  self.in_features, self.out_features = in_features, out_features
  local o = { dtype = opts.dtype or "f32", device = opts.device, tag = "weights" }
  self:add_param("weight", T.zeros({ out_features, in_features }, o))
  if opts.bias ~= false then self:add_param("bias", T.zeros({ out_features }, o)) end
  return self
end

function Linear:forward(x)
  local y = ops.linear(x, self.weight.value, self.bias and self.bias.value or nil)
  if self.weight.trainable then self:keep("x", x) end
  self.saved.ran = self.grad_enabled or nil   -- a backward is legal (even with nothing kept)
  return y
end

-- a = gelu(x W^T + b) and the pre-activation h in one op (ops.linear_gelu: on CUDA the tanh
-- form rides in the product's cuBLASLt epilogue); kind is an ops.gelu_kind. The layer keeps
-- what forward keeps, so backward(dh) is the same.
function Linear:forward_gelu(x, kind)
  local a, h = ops.linear_gelu(x, self.weight.value, self.bias and self.bias.value or nil, kind)
  if self.weight.trainable then self:keep("x", x) end
  self.saved.ran = self.grad_enabled or nil
  return a, h
end

-- For a caller that can remake m's input with the same bits (a LayerNorm's or an
-- activation's output, from what the norm or the block keeps anyway): drop_input frees the
-- copy a plain Linear m kept for its weight gradient and says whether there was one;
-- give_input hands m a view of x (the remade input) before its backward. A module wrapping a
-- Linear (LoRA) is not a Linear and keeps its own; both leave it alone.
function Linear.drop_input(m)
  if getmetatable(m) ~= Linear or not m.saved.x then return false end
  m.saved.x:free()
  m.saved.x = nil
  return true
end

function Linear.give_input(m, x)
  if getmetatable(m) == Linear and m.weight.trainable then m.saved.x = T.keep(x:reshape(x:shape())) end
end

-- For a caller that needs m's backward but not its output (the last product of a layer that a
-- checkpointed backward re-runs, whose output the next segment holds already): skip_forward
-- marks m's forward as run without the product, and says so, when m is a plain Linear, whose
-- input the caller then remakes with give_input when it trains; false for anything else (a
-- LoRA wrapper keeps what its own backward reads): run its forward.
function Linear.skip_forward(m)
  if getmetatable(m) ~= Linear then return false end
  m.saved.ran = m.grad_enabled or nil
  return true
end

-- want_dx = false skips the input gradient (the first layer of a frozen stack); bias_done
-- leaves the bias gradient alone (backward_dgelu of the next layer summed it); into (x's
-- shape) takes the input gradient added in the product (+=, no temporary and no add pass)
-- and is returned.
function Linear:backward(dy, want_dx, bias_done, into)
  if not self.saved.ran then self:saved_tensor("x") end   -- the user error: no forward kept
  local x = self.weight.trainable and self:saved_tensor("x") or nil
  local dx = ops.linear_backward(dy, x, self.weight.value, Module.grad_of(self.weight),
    (self.bias and not bias_done) and Module.grad_of(self.bias) or nil, want_dx, into)
  self:release()
  return dx
end

-- The backward of y = self(gelu(h)) through to h, where prev (a Linear) made h and forward_gelu
-- kept it: returns dh = (dy W) * gelu'(h) (ops.linear_backward_dgelu: on CUDA the tanh form's
-- derivative rides in the product's cuBLASLt epilogue), accumulates this layer's gradients and
-- prev's bias gradient; then prev:backward(dh, want_dx, true).
function Linear:backward_dgelu(dy, h, kind, prev)
  if not self.saved.ran then self:saved_tensor("x") end
  local x = self.weight.trainable and self:saved_tensor("x") or nil
  local dh = ops.linear_backward_dgelu(dy, x, self.weight.value, h, kind, Module.grad_of(self.weight),
    self.bias and Module.grad_of(self.bias) or nil, prev.bias and Module.grad_of(prev.bias) or nil)
  self:release()
  return dh
end

return Linear
