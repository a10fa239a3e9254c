-- The BERT layer's fused block end (nn.dropout_add_norm over
-- ops.dropout_add_layernorm, in the attention and feed-forward blocks of every layer): a small
-- random BERT with dropout 0.1 on every site gives, fused, the output and every parameter
-- gradient of the three unfused ops it replaced (dropout -> add -> layernorm, run here by
-- swapping nn.dropout_add_norm's two functions for them): to 1e-5 in fp32 (the fused row
-- reductions are simd reductions; a different dropout mask moves them by far more) and bit for
-- bit in bf16 and fp16 (the half path rounds where the unfused ops round); plain, checkpointed
-- per layer (the recomputation replays the mask) and with LoRA. The fused step keeps no more
-- activation bytes after the forward and peaks no higher (the model's peak lies elsewhere, in
-- the feed-forward's [tokens, intermediate] tensors).
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")
local lora = require("trainer.train.lora")
local add_norm = require("trainer.nn.dropout_add_norm")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local shape = { hidden_size = 48, num_hidden_layers = 3, num_attention_heads = 4, intermediate_size = 96,
                vocab_size = 200, max_position_embeddings = 64, hidden_dropout_prob = 0.1,
                attention_probs_dropout_prob = 0.1 }
local B, S = 3, 11

-- The code the fused op replaced: each child module's own forward and backward (the model
-- here runs unpacked, so its dropout draws each row's mask as the fused op does).
local unfused = add_norm.unfused

-- One forward + backward; returns { out = values, grads = { name -> values }, saved, peak }.
local function step(spec, impl)
  local fused_forward, fused_backward = add_norm.forward, add_norm.backward
  local calls = { forward = 0, backward = 0 }   -- the layers must go through nn.dropout_add_norm
  add_norm.forward = function(...) calls.forward = calls.forward + 1 return impl.forward(...) end
  add_norm.backward = function(...) calls.backward = calls.backward + 1 return impl.backward(...) end
  local ok, res = pcall(function()
    local m = bert.BertModel.new(bert.config(shape, "test"), { seed = 1, pooler = false })
    if spec.lora then lora.apply(m, { r = 4, alpha = 8, dropout = 0.1, targets = { "query", "value", "dense" } }) end
    local y, saved, input, before = lib.forward_counting_kept(m, spec, B, S)
    local w = T.randn(y:shape(), { seed = 9, stream = 1, tag = "workspace", dtype = y:dtype() })
    m:backward(w)
    local peak = memory.stats().peak_by_tag.activations - before
    local grads = {}
    for name, p in m:parameters() do
      if p.trainable and p.grad then grads[name] = p.grad:values() end
    end
    local out = y:values()
    w:free(); y:free(); input.input_ids:free(); input.attention_mask:free()
    m:free()
    return { out = out, grads = grads, saved = saved, peak = peak, calls = calls }
  end)
  add_norm.forward, add_norm.backward = fused_forward, fused_backward
  if not ok then error(res, 0) end
  return res
end

local function close(a, b, tol, what)
  assert(#a == #b, what .. ": sizes differ")
  local worst = 0
  for i = 1, #a do
    local d = math.abs(a[i] - b[i])
    if tol == 0 then
      assert(a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i]),
        ("%s[%d]: fused %.9g, unfused %.9g (want the same bits)"):format(what, i, a[i], b[i]))
    else
      assert(d <= tol * math.max(1, math.abs(b[i])), ("%s[%d]: fused %.9g, unfused %.9g"):format(what, i, a[i], b[i]))
    end
    if d > worst then worst = d end
  end
  return worst
end

local function check(spec, tol)
  local f = step(spec, { forward = add_norm.forward, backward = add_norm.backward })
  local u = step(spec, unfused)
  -- two block ends per layer, each run once forward (checkpointed per layer, again in the
  -- backward: every layer but the last, whose segment keeps its forward's) and once backward
  local L = shape.num_hidden_layers
  local fwd = 2 * (spec.checkpoint and 2 * L - 1 or L)
  for _, r in ipairs({ f, u }) do
    assert(r.calls.forward == fwd and r.calls.backward == 2 * L,
      ("%d forward and %d backward block ends, want %d and %d"):format(r.calls.forward, r.calls.backward, fwd, 2 * L))
  end
  close(f.out, u.out, tol, "output")
  local n = 0
  for name, g in pairs(u.grads) do
    close(assert(f.grads[name], name .. ": no fused gradient"), g, tol, name)
    n = n + 1
  end
  assert(n > 0, "no trainable gradient compared")
  -- the norms' gradients exist: the fused backward reached them
  if not spec.lora then assert(f.grads["encoder.layer.0.output.LayerNorm.weight"], "no LayerNorm gradient") end
  print(("  %s: %d gradients; activations kept after forward %d B fused / %d B unfused, peak %d / %d B"):format(
    spec.name, n, f.saved, u.saved, f.peak, u.peak))
  assert(f.saved <= u.saved, ("kept %d bytes fused, more than %d unfused"):format(f.saved, u.saved))
  assert(f.peak <= u.peak, ("peak %d bytes fused, above %d unfused"):format(f.peak, u.peak))
end

-- fp32: the fused and unfused rounding differences add up in the position embeddings'
-- gradient, a sum over every token: 0.8e-5 of it with the OpenBLAS attention tiles, 1.1e-5
-- (cblas path) to 1.7e-5 (AVX-512/AVX2 tiles) with kernels/cpu/attn_tile.c, whose f32 error
-- against f64 is the same (tests/c/test_attention.c); the other gradients stay below 1e-6.
local FP32_TOL = 3e-5
return {
  { "fp32_same_as_unfused", function() check({ name = "fp32" }, FP32_TOL) end },
  { "fp32_checkpointed_same_as_unfused", function() check({ name = "fp32 ckpt", checkpoint = true }, FP32_TOL) end },
  { "fp32_lora_same_as_unfused", function() check({ name = "fp32 lora", lora = true }, 1e-5) end },
  { "bf16_same_bits_as_unfused", function() check({ name = "bf16", precision = "bf16" }, 0) end },
  { "fp16_lora_checkpointed_same_bits_as_unfused", function()
    check({ name = "fp16 lora ckpt", precision = "fp16", lora = true, checkpoint = true }, 0)
  end },
}
