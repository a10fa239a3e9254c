-- A full fine-tune's feed-forward keeps the pre-activation alone (models/bert/feedforward.lua):
-- the activation's output, output.dense's input, is dropped after the forward and remade from
-- the pre-activation in the backward. On a small random BERT with dropout on every site, the
-- output and every gradient are the bits of the same model whose output.dense keeps its
-- input (a subclass of Linear, which the block leaves alone), plain, checkpointed per layer
-- and in bf16; the forward keeps exactly one [rows, intermediate] tensor less per layer; the
-- tanh GELU, whose output a CUDA product makes in its epilogue, keeps it as before.
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")
local amp = require("trainer.train.amp")
local checkpoint = require("trainer.train.grad_checkpoint")
local Linear = require("trainer.nn.linear")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local base = { hidden_size = 48, num_hidden_layers = 3, num_attention_heads = 4, intermediate_size = 96,
               vocab_size = 200, max_position_embeddings = 64, hidden_dropout_prob = 0.1,
               attention_probs_dropout_prob = 0.1 }
local B, S = 3, 11

-- A Linear of another class: the feed-forward does not drop what it keeps.
local KeepingLinear = Linear:extend("KeepingLinear")

local function shape_with(act)
  local s = {}
  for k, v in pairs(base) do s[k] = v end
  s.hidden_act = act
  return s
end

-- One forward + backward; returns { out, grads = { name -> values }, saved (activation bytes
-- kept after the forward) }. keep: every layer's output.dense keeps its input.
local function step(spec, keep)
  local m = bert.BertModel.new(bert.config(shape_with(spec.act), "test"), { seed = 1, pooler = false })
  if keep then
    for _, layer in ipairs(m.encoder.layers) do setmetatable(layer.ffn.dense2, KeepingLinear) end
  end
  amp.prepare(m, spec.precision or "fp32")
  if spec.checkpoint then checkpoint.apply(m, { every = 1 }) end
  m:train()
  m.rng.seed, m.rng.step = 42, 3
  local ids, mask = {}, {}
  for i = 1, B * S do
    ids[i] = 3 + (i * 37) % 190
    mask[i] = ((i - 1) % S) < S - (i % 3) * 2 and 1 or 0   -- rows padded at their ends
  end
  local input = { input_ids = lib.int_matrix(ids, B, S), attention_mask = lib.int_matrix(mask, B, S) }
  local before = memory.stats().by_tag.activations
  local y = m:forward(input)
  local saved = memory.stats().by_tag.activations - before - y:nbytes()
  local w = T.randn(y:shape(), { seed = 9, stream = 1, tag = "workspace", dtype = y:dtype() })
  m:backward(w)
  local grads, n = {}, 0
  for name, p in m:parameters() do
    if p.trainable and p.grad then grads[name], n = p.grad:values(), n + 1 end
  end
  assert(n > 0, "no gradient")
  local out = y:values()
  w:free(); y:free(); input.input_ids:free(); input.attention_mask:free()
  m:free()
  return { out = out, grads = grads, saved = saved }
end

local function same_bits(a, b, what)
  assert(#a == #b, what .. ": sizes differ")
  for i = 1, #a do
    assert(a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i]),
      ("%s[%d]: remade %.9g, kept %.9g (want the same bits)"):format(what, i, a[i], b[i]))
  end
end

-- remade: whether the block remakes (the [rows, I] tensor one fewer per layer) or keeps.
local function check(spec, remade)
  local r, k = step(spec, false), step(spec, true)
  same_bits(r.out, k.out, "output")
  local n = 0
  for name, g in pairs(k.grads) do
    same_bits(assert(r.grads[name], name .. ": no gradient when remade"), g, name)
    n = n + 1
  end
  local L, I = base.num_hidden_layers, base.intermediate_size
  local row = I * ((spec.precision == "bf16") and 2 or 4)
  local less = k.saved - r.saved
  print(("  %s: %d gradients, the same bits; kept after the forward %d B remade / %d B kept"):format(
    spec.name, n, r.saved, k.saved))
  if not remade then
    assert(less == 0, ("%s: %d bytes fewer kept, want the activation's output kept"):format(spec.name, less))
  elseif spec.checkpoint then
    -- a checkpointed layer keeps its input alone after the forward: the remake shows in the backward
    assert(less == 0, ("%s: %d bytes apart after a checkpointed forward"):format(spec.name, less))
  else
    -- one [B x S, I] tensor fewer per layer (the model runs the padded rows), as the CPU
    -- allocator's 512-byte blocks hold it
    local want = L * math.ceil(B * S * row / 512) * 512
    assert(less == want, ("%s: %d bytes fewer kept, want %d (one [%d, %d] per layer)"):format(
      spec.name, less, want, B * S, I))
  end
end

return {
  { "fp32_remade_same_bits_less_kept", function() check({ name = "fp32" }, true) end },
  { "fp32_checkpointed_remade_same_bits", function() check({ name = "fp32 ckpt", checkpoint = true }, true) end },
  { "bf16_remade_same_bits_less_kept", function() check({ name = "bf16", precision = "bf16" }, true) end },
  { "relu_remade_same_bits_less_kept", function() check({ name = "relu", act = "relu" }, true) end },
  { "tanh_gelu_keeps_its_output", function() check({ name = "gelu_new", act = "gelu_new" }, false) end },
}
