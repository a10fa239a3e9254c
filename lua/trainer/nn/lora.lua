-- trainer.nn.LoraLinear: a Linear with a low-rank adapter, PEFT's lora.Linear:
--   y = x W^T + b + scale * (Dropout(x) A^T) B^T
-- A [r, in] (kaiming-uniform, a = sqrt(5), as torch's Linear init), B [out, r] (zeros, so the
-- wrapped layer starts as the base layer), scale = alpha / r (alpha / sqrt(r) with rslora).
--
-- Names: the base Linear is a transparent child, so its parameters keep their Hugging Face
-- names (...query.weight, ...query.bias); the adapter adds ...query.lora_A.weight and
-- ...query.lora_B.weight, PEFT's keys without "base_model.model." and the adapter name.
-- Memory invariants: the base weight is read, never written (frozen: no grad buffer); the
-- forward keeps only what a trainable parameter's gradient needs: a view of x (shared with
-- whoever else keeps the same input: the checkpoint boundary, the other adapters of the
-- layer) and the rank-r intermediate. The dropped-out LoRA input is never kept: the
-- backward regenerates it from x and the saved dropout key (the mask is keyed, so this is
-- bitwise the forward's), which saves one [.., in] copy per adapted layer when
-- lora.dropout > 0. The input gradient always flows (frozen layers pass gradients through).
-- Dropout site: (layer = rng_sites.lora_layer(index of the adapted module), op =
-- rng_sites.dropout.lora); the mask is replayed from the keyed RNG in the backward, never stored.
local Module = require("trainer.nn.module")
local Dropout = require("trainer.nn.dropout")
local T = require("trainer.core.tensor")
local sites = require("trainer.core.rng_sites")
local ops = require("trainer.core.ops")

local LoraLinear = Module:extend("LoraLinear")

-- base: the Linear to adapt (kept, its parameters untouched); spec: r, alpha, dropout,
-- rslora, resolved (trainer.train.lora.normalize: the recipe key lora's defaults); index: this adapter's number (dropout site and init stream); rng: the model's
-- shared { seed, step } table; seed: init seed.
function LoraLinear.new(base, spec, index, rng, seed)
  local self = LoraLinear:create()
  local r, alpha = spec.r, spec.alpha
  self.r, self.alpha = r, alpha
  self.scale = spec.rslora and alpha / math.sqrt(r) or alpha / r
  self.in_features, self.out_features = base.in_features, base.out_features
  self:add_module("", base, "base")
  local device = base.weight.value:device()
  -- Kaiming-uniform with a = sqrt(5) over fan_in = in: U(-1/sqrt(in), 1/sqrt(in)), drawn
  -- from the keyed RNG (seed, this adapter's stream) so runs are reproducible.
  self:add_param_as("lora_A.weight", T.random({ r, base.in_features }, { dist = "uniform",
    bound = 1 / math.sqrt(base.in_features), seed = seed or 0, stream = sites.lora_A(index), device = device,
    tag = "weights" }, "lora init"), "lora_A")
  self:add_param_as("lora_B.weight", T.zeros({ base.out_features, r }, { dtype = "f32", device = device,
    tag = "weights" }), "lora_B")
  self:add_module("lora_dropout", Dropout.new(spec.dropout, rng, sites.lora_layer(index), sites.dropout.lora), "dropout")
  return self
end

-- Registers a parameter under its dotted name, reachable as self[field].
function LoraLinear:add_param_as(name, value, field)
  local p = self:add_param(name, value, true)
  self[name] = nil
  self[field] = p
  return p
end


-- pk: the packing x's rows come from (trainer.nn.packing), or nil; the LoRA dropout keeps
-- the padded layout's masks through it.
function LoraLinear:forward(x, pk)
  local base = self.base
  local y = ops.linear(x, base.weight.value, base.bias and base.bias.value or nil)
  local drop, a = self.dropout
  self.saved.drop_key = nil
  if drop:active() and not pk then
    -- dropout and the down-projection in one op: the dropped-out copy is never made (the
    -- packed rows keep the two ops: their masks follow the padded layout)
    a = ops.dropout_linear(x, self.lora_A.value, drop.p, drop:key())
    if self.grad_enabled then self.saved.drop_key = { seed = drop.rng.seed, step = drop.rng.step } end
  else
    local xd = drop:forward(x, pk)
    a = ops.linear(xd, self.lora_A.value)
    xd:free()                     -- a view of x, or the dropped-out copy: rebuilt in backward
  end
  -- y += scale * a B^T in the product itself (beta = 1): no [.., out] temporary and no axpy pass
  ops.matmul(a, self.lora_B.value, { out = y, trans_b = true, alpha = self.scale, beta = 1 })
  if self.grad_enabled then
    self:keep("x", x)
    self.saved.a = T.keep(a)
  else
    a:free()
  end
  return y
end

-- dy: [..., out]; parameter grads ACCUMULATE (+=) into lora_A/lora_B (and the base's when
-- trainable; bias_done leaves the base's bias gradient alone, as Linear:backward); returns dx
-- (=), a new tensor, or, given into (x's shape), into += dx. Both paths' input gradients add
-- in their products (beta = 1: no temporary, no add pass); an active LoRA dropout runs fused
-- (backward_fused); with packed rows its backward sits between the adapter's product and dx,
-- so that path keeps one add.
-- The base's input gradient (new, into `into` when given, nil when not wanted, the base's
-- gradients accumulated), lora_B's gradient accumulated and da = scale dy B (new): scale folded
-- into the products' alpha (no scaled copy of dy), dB += scale dy^T a over all rows.
local function base_and_b(self, dy, x, a, want_dx, bias_done, into)
  local base = self.base
  local dx = ops.linear_backward(dy, x, base.weight.value, Module.grad_of(base.weight),
    (base.bias and not bias_done) and Module.grad_of(base.bias) or nil, want_dx, into)
  local out = base.out_features
  ops.matmul(dy:reshape({ dy:numel() / out, out }), a:reshape({ a:numel() / self.r, self.r }),
    { out = Module.grad_of(self.lora_B), trans_a = true, alpha = self.scale, beta = 1 })
  return dx, ops.matmul(dy, self.lora_B.value, { alpha = self.scale })
end

function LoraLinear:backward(dy, want_dx, bias_done, into)
  local x, a = self:saved_tensor("x"), self.saved.a
  local k = self.saved.drop_key
  if k then return self:backward_fused(dy, want_dx, bias_done, into, x, a, k) end
  local dropped = self.dropout.p > 0
  local dx, dxd = T.scope(function()
    local xd = self.dropout:replay(x)   -- the forward's dropped-out input (same key, same mask)
    local dx, da = base_and_b(self, dy, x, a, want_dx, bias_done, into)
    local dxa = ops.linear_backward(da, xd, self.lora_A.value, Module.grad_of(self.lora_A), nil, want_dx,
      not dropped and dx or nil)
    return dx, dropped and dxa or nil
  end)
  self:release()
  if dxd then
    T.scope(function() ops.add_(dx, self.dropout:backward(dxd)) end)   -- dx += the LoRA path's
    dxd:free()
  end
  return dx
end

-- backward after the fused forward (dropout_linear): the LoRA path's input gradient is added
-- into the base's (or into `into`) by dropout_linear_backward, which also accumulates lora_A's
-- gradient: no add pass on either path.
function LoraLinear:backward_fused(dy, want_dx, bias_done, into, x, a, k)
  local drop = self.dropout
  local dx = T.scope(function()
    local dx, da = base_and_b(self, dy, x, a, want_dx, bias_done, into)
    local key = ops.rng_key({ seed = k.seed, step = k.step, layer = drop.layer, op = drop.op })
    ops.dropout_linear_backward(da, x, self.lora_A.value, dx, Module.grad_of(self.lora_A), drop.p, key)
    return dx
  end)
  self:release()
  return dx
end

-- The weight update this adapter stands for, scale * B A ([out, in], f32, a new tensor).
function LoraLinear:delta()
  return ops.matmul(self.lora_B.value, self.lora_A.value, { alpha = self.scale, tag = "workspace" })
end

return LoraLinear
