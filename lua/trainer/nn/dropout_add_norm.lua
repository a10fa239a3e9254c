-- trainer.nn.dropout_add_norm: the end of BERT's two post-LN blocks (attention output and
-- feed-forward output), y = LayerNorm(residual + Dropout(x)), as one fused op
-- (ops.dropout_add_layernorm: one pass over the rows instead of three ops and their
-- temporaries) over the block's own Dropout and LayerNorm children, whose names, parameters
-- and dropout site do not change. The mask is the Dropout's (same key, same stream, same
-- bits), and what the backward needs is kept in the children's saved tables exactly as the
-- unfused modules keep it (LayerNorm: its input sum, mean and rstd; Dropout: its key as
-- numbers), so Checkpoint's clear_saved, a re-run forward and each module's release behave as
-- before; with grad disabled nothing is kept.
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")

local M = {}

-- The forward's dropout probability and key (nil when the dropout is the identity).
local function forward_key(dropout)
  if not dropout:active() then return 0, nil end
  return dropout.p, dropout:key()
end

-- The three ops the fused one replaces, each child module's own forward and backward: the
-- block end for packed rows under an active dropout (below), and the reference the fused op
-- is tested against (tests/lua/test_dropout_add_norm.lua).
M.unfused = {}

function M.unfused.forward(dropout, norm, x, residual, pk)
  local od = dropout:forward(x, pk)
  local sum = ops.add(od, residual)
  od:free()
  local y = norm:forward(sum)
  sum:free()
  return y
end

function M.unfused.backward(dropout, norm, dy)
  local dsum = norm:backward(dy)
  local dod = dropout:backward(dsum)
  return dod, dsum
end

-- y (new) = norm(residual + dropout(x)); x and residual stay the caller's. The sum is a tensor
-- of its own, not written over x (the op allows that): keeping x's block alive instead moved
-- the caching allocator's segments so that the fp32 LoRA step reserved one more
-- [tokens, intermediate] segment (575 -> 600 MiB), for one [tokens, hidden] activation less at
-- a moment that is not the step's peak.
-- pk: the packing of x's rows (trainer.nn.packing) when the encoder runs on the real rows only.
-- The fused op draws each element's keep bit from its own row, the packed dropout from the
-- row's padded position: with a packing and an active dropout the block end runs unfused.
function M.forward(dropout, norm, x, residual, pk)
  if pk and dropout:active() then return M.unfused.forward(dropout, norm, x, residual, pk) end
  local p, key = forward_key(dropout)
  if not norm.grad_enabled then   -- nothing for a backward: no sum, mean or rstd
    return ops.dropout_add_layernorm(x, residual, norm.weight.value, norm.bias.value, norm.eps, p, key, nil,
      { stats = false })
  end
  local y, sum, mean, rstd = ops.dropout_add_layernorm(x, residual, norm.weight.value, norm.bias.value, norm.eps, p, key)
  norm:keep_owned("x", sum)
  norm:keep_owned("mean", mean)
  norm:keep_owned("rstd", rstd)
  -- numbers, not the live table: the backward must use the forward's step even if the loop
  -- advanced it in between
  if key and dropout.grad_enabled then dropout.saved.key = { seed = dropout.rng.seed, step = dropout.rng.step } end
  return y
end

-- Whether remake can give the block end's output again: its norm keeps an f32 sum (a half
-- sum is rounded after the output was made from it).
function M.remakeable(norm)
  local sum = norm.saved.x
  return sum ~= nil and sum:dtype() == "f32"
end

-- The block end's output again (new), from what its norm keeps for the backward, with the
-- forward's bits: the fused op over the kept sum with a zero residual and no dropout (the
-- kernels reduce a row's sums whatever made them, kernels/cpu/dropout_add_layernorm.c), or,
-- where the forward ran unfused, the layernorm op over it. A consumer that kept the output
-- for a weight gradient (the next Linear's input) drops it after the forward and remakes it
-- here in the backward.
function M.remake(dropout, norm)
  local sum = norm:saved_tensor("x")
  local w, b = norm.weight.value, norm.bias and norm.bias.value
  return T.scope(function()
    if dropout.saved.pk then return (ops.layernorm(sum, w, b, norm.eps)) end
    local zero = T.zeros(sum:shape(), { dtype = "f32", device = sum:device(), tag = "activations" })
    return ops.dropout_add_layernorm(sum, zero, w, b, norm.eps, 0, nil, nil, { stats = false })
  end)
end

-- dx (new, the gradient of x) and dresidual (new, the gradient of the residual); the
-- LayerNorm's weight and bias gradients accumulate. Releases both children's saved state.
function M.backward(dropout, norm, dy)
  if dropout.saved.pk then   -- the forward ran unfused (packed rows, active dropout)
    return M.unfused.backward(dropout, norm, dy)
  end
  local s = norm.saved
  local sum = norm:saved_tensor("x")
  local k, p, key = dropout.saved.key, 0, nil
  if k then
    p = dropout.p
    key = ops.rng_key({ seed = k.seed, step = k.step, layer = dropout.layer, op = dropout.op })
  end
  local dx, dres = ops.dropout_add_layernorm_backward(dy, sum, norm.weight.value, s.mean, s.rstd,
    Module.grad_of(norm.weight), Module.grad_of(norm.bias), p, key)
  norm:release()
  dropout:release()
  return dx, dres
end

return M
