-- trainer.nn.Dropout: inverted dropout with a keyed, stateless mask. Each dropout site
-- has a fixed (layer, op) id; the model's shared rng table { seed, step } (set by the
-- training loop) completes the key, so re-running forward (gradient checkpointing,
-- cached MNRL) replays the same mask and the backward regenerates it instead of storing
-- it. Identity (a view) in eval mode or when p is 0. forward(x, pk): with a packing
-- (trainer.nn.packing) x holds only the real rows, and each element keeps its padded-layout
-- mask; the packing is saved with the key, so replay and backward draw the same bits.
local Module = require("trainer.nn.module")
local ops = require("trainer.core.ops")

local Dropout = Module:extend("Dropout")

-- rng: the shared { seed =, step = } table (the model's); layer, op: this site's id.
function Dropout.new(p, rng, layer, op)
  local self = Dropout:create()
  self.p, self.rng, self.layer, self.op = p or 0, rng or { seed = 0, step = 0 }, layer or 0, op or 0
  return self
end

function Dropout:active() return self.training and self.p > 0 end

function Dropout:key()
  return ops.rng_key({ seed = self.rng.seed, step = self.rng.step, layer = self.layer, op = self.op })
end

-- x with the mask made from key (a ops.rng_key), over the packed rows when pk is given.
local function apply(x, p, key, pk)
  if pk then return pk:dropout(x, p, key) end
  return ops.dropout(x, p, key)
end

function Dropout:forward(x, pk)
  if not self:active() then return x:reshape(x:shape()) end
  -- The key is saved as plain numbers: the backward must use the forward's step even if
  -- the loop advanced it in between.
  if self.grad_enabled then
    self.saved.key = { seed = self.rng.seed, step = self.rng.step }
    self.saved.pk = pk
  end
  return apply(x, self.p, self:key(), pk)
end

-- What forward saves for the backward, without its output: for a caller that re-runs a
-- forward only for what it keeps (a checkpointed segment's last layer, whose output the next
-- segment holds) and remakes the dropped-out values, if it needs them, by replay.
function Dropout:skip_forward(pk)
  if self:active() and self.grad_enabled then
    self.saved.key = { seed = self.rng.seed, step = self.rng.step }
    self.saved.pk = pk
  end
end

-- The forward's output again, from the key the forward saved (a new tensor, or a view of x
-- when the forward was the identity); saved state is left as it is for backward. Lets a
-- module keep x instead of the dropped-out copy (LoRA's input).
function Dropout:replay(x)
  local k = self.saved.key
  if not k then return x:reshape(x:shape()) end
  return apply(x, self.p, ops.rng_key({ seed = k.seed, step = k.step, layer = self.layer, op = self.op }), self.saved.pk)
end

function Dropout:backward(dy)
  local k = self.saved.key
  if not k then return dy:reshape(dy:shape()) end   -- the forward was the identity
  local key = ops.rng_key({ seed = k.seed, step = k.step, layer = self.layer, op = self.op })
  local pk = self.saved.pk
  local dx = pk and pk:dropout_backward(dy, self.p, key) or ops.dropout_backward(dy, self.p, key)
  self:release()
  return dx
end

return Dropout
