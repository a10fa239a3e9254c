-- A full fine-tune's BERT layer keeps no copy of what it can remake with the same bits
-- (models/bert/feedforward.lua, models/bert/layer.lua, models/bert/attention.lua): the heads'
-- output (the attention's output dense's input) is remade by the attention op from the kept
-- q, k, v, the activation's output (output.dense's input) from the pre-activation, and in f32
-- the two post-LN block
-- outputs the next Linears read (the feed-forward's input, the next layer's input, which
-- query, key and value keep) from their LayerNorms' kept sums (nn.dropout_add_norm.remake).
-- On a small random BERT with dropout on every site, the output and every gradient are the
-- bits of the same model whose Linears keep their inputs (a subclass of Linear, which the
-- layers leave alone), plain, checkpointed per layer, in bf16 (the activation alone: a bf16
-- sum is rounded after the output was made) and under ReLU; the forward keeps exactly the
-- remade tensors fewer; the tanh GELU keeps its output (a CUDA product writes it in its
-- epilogue).
local T = require("trainer.core.tensor")
local bert = require("trainer.models.bert")
local Linear = require("trainer.nn.linear")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local base = { hidden_size = 48, num_hidden_layers = 3, num_attention_heads = 4, intermediate_size = 96,
               vocab_size = 200, max_position_embeddings = 64, hidden_dropout_prob = 0.1,
               attention_probs_dropout_prob = 0.1 }
local B, S = 3, 11

-- A Linear of another class: the layers do not drop what it keeps.
local KeepingLinear = Linear:extend("KeepingLinear")
local LINEARS = { { "attention", "query" }, { "attention", "key" }, { "attention", "value" },
                  { "attention", "dense" }, { "ffn", "dense1" }, { "ffn", "dense2" } }

local function shape_with(act)
  local s = {}
  for k, v in pairs(base) do s[k] = v end
  s.hidden_act = act
  return s
end

-- One forward + backward; returns { out, grads = { name -> values }, saved (activation bytes
-- kept after the forward) }. keep: every layer's Linears keep their inputs.
local function step(spec, keep)
  local m = bert.BertModel.new(bert.config(shape_with(spec.act), "test"), { seed = 1, pooler = false })
  if keep then
    for _, layer in ipairs(m.encoder.layers) do
      for _, l in ipairs(LINEARS) do setmetatable(layer[l[1]][l[2]], KeepingLinear) end
    end
  end
  local y, saved, input = lib.forward_counting_kept(m, spec, B, S)
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

-- remade: the tensors a layer remakes besides the heads' output (act: the activation's output,
-- outs: the block outputs)
local function check(spec, remade)
  local r, k = step(spec, false), step(spec, true)
  same_bits(r.out, k.out, "output")
  local n = 0
  for name, g in pairs(k.grads) do
    same_bits(assert(r.grads[name], name .. ": no gradient when remade"), g, name)
    n = n + 1
  end
  local L, H, I = base.num_hidden_layers, base.hidden_size, base.intermediate_size
  local e = spec.precision == "bf16" and 2 or 4
  -- the model runs the padded rows, B x S; the CPU allocator holds a tensor in 512-byte blocks
  local function block(cols) return math.ceil(B * S * cols * e / 512) * 512 end
  local want = L * block(H)   -- every layer's heads' output
  if remade.act then want = want + L * block(I) end
  -- every layer's feed-forward input; every layer's input but the first's (the stack's input)
  if remade.outs then want = want + (2 * L - 1) * block(H) end
  -- checkpointed per layer, a layer keeps its input alone after the forward, but the last,
  -- whose segment keeps its forward's (trainer.nn.Checkpoint's keeps_forward): its heads'
  -- output, activation output and feed-forward input (its input is the segment's)
  if spec.checkpoint then
    want = block(H) + (remade.act and block(I) or 0) + (remade.outs and block(H) or 0)
  end
  local less = k.saved - r.saved
  print(("  %s: %d gradients, the same bits; kept after the forward %d B remade / %d B kept"):format(
    spec.name, n, r.saved, k.saved))
  assert(less == want, ("%s: %d bytes fewer kept, want %d"):format(spec.name, less, want))
end

return {
  { "fp32_remade_same_bits_less_kept", function() check({ name = "fp32" }, { act = true, outs = true }) end },
  { "fp32_checkpointed_remade_same_bits", function()
    check({ name = "fp32 ckpt", checkpoint = true }, { act = true, outs = true })
  end },
  { "bf16_activation_remade_same_bits", function() check({ name = "bf16", precision = "bf16" }, { act = true }) end },
  { "relu_remade_same_bits_less_kept", function()
    check({ name = "relu", act = "relu" }, { act = true, outs = true })
  end },
  { "tanh_gelu_keeps_its_output", function() check({ name = "gelu_new", act = "gelu_new" }, { outs = true }) end },
}
