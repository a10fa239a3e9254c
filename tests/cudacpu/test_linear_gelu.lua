-- tests/cudacpu/test_linear_gelu.lua — the feed-forward's up-projection and GELU on device =
-- "cuda" against the CPU, for a tiny BERT (one layer, intermediate 64) with hidden_act
-- "gelu_new" (tanh) and "gelu" (erf): one forward and backward of a sequence classifier, the
-- same weights on both devices, no dropout. The logits, loss and every gradient must agree,
-- and under the emulator (its launch log) the tanh model's forward and backward make no GELU
-- or GELU derivative pass of their own (they ride in the cuBLASLt products' epilogues: f32, so
-- the bias gradient too) while the erf model's make one each a layer; a bf16 full fine-tune of
-- the tanh model fuses its forward too (its f32 weights run as their bf16 copies) (one for both where the emulator's cuBLASLt withholds the epilogue, below).
-- Run: build/cudacpu/trainer run tests/cudacpu/test_linear_gelu.lua
local ffi = require("ffi")
local T = require("trainer.core.tensor")
local bert = require("trainer.models.bert")
local losses = require("trainer.losses")
local Module = require("trainer.nn.module")
local amp = require("trainer.train.amp")

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu") .. "/harness.lua")
local check, rel_diff, log_ok = h.check, h.rel_diff, h.log_ok

local B, S = 2, 12
local ids, mask = {}, {}
for i = 1, B * S do ids[i] = 100 + (i * 37) % 150; mask[i] = 1 end
local function batch_on(device)
  local function m(v)
    local flat = T.from_table(v, { dtype = "i32", device = device, tag = "activations" })
    local r = flat:reshape({ B, S })
    flat:free()
    return r
  end
  return { input_ids = m(ids), attention_mask = m(mask) }
end

-- the launches in the log whose kernel name has `what`
local count = h.launches

-- one forward and backward on `device`: logits, loss, { name = grad } and the forward's GELU launches
local function run(act, device, precision)
  local cfg = bert.config({ hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64,
    vocab_size = 300, max_position_embeddings = 64, hidden_act = act, hidden_dropout_prob = 0,
    attention_probs_dropout_prob = 0 }, "test")
  local model = bert.SequenceClassifier.new(bert.BertModel.new(cfg, { seed = 1, device = device }), 2,
    { seed = 1, device = device })
  if precision then amp.prepare(model, precision) end
  model:train()
  local loss = losses.new({ name = "cross_entropy" })
  local batch = batch_on(device)
  local first = log_ok and device == "cuda" and (ffi.C.cudacpu_launch_log(1) or 0) or nil
  local logits = model:forward(batch)
  local gelu_passes = first and count("gelu_fwd") or nil
  if first then ffi.C.cudacpu_launch_log(0) end
  local l = loss:forward({ logits }, { 1, 0 })
  local g = loss:backward()[1]
  if first then ffi.C.cudacpu_launch_log(1) end
  model:backward(g)
  local dgelu_passes = first and count("gelu_bwd") or nil
  if first then ffi.C.cudacpu_launch_log(0) end
  local grads = {}
  for name, p in model:parameters() do
    if p.trainable then grads[name] = Module.grad_of(p):to("cpu") end
  end
  local out = { logits = logits:to("cpu"), loss = type(l) == "number" and l or l:to("cpu"), grads = grads,
    gelu_passes = gelu_passes, dgelu_passes = dgelu_passes }
  g:free(); logits:free(); batch.input_ids:free(); batch.attention_mask:free()
  loss:free(); model:free()
  return out
end

-- CUDACPU_LT_EPILOGUES=bias or none (tests/cudacpu/suites.sh runs both settings): the stand-in
-- withholds the GELU epilogue, and the tanh model must fall back to the product and its pass
local fused = (os.getenv("CUDACPU_LT_EPILOGUES") or "all") == "all"
for _, act in ipairs({ "gelu_new", "gelu" }) do
  local cpu, cuda = run(act, "cpu"), run(act, "cuda")
  local d = rel_diff(cuda.logits, cpu.logits)
  check(act .. "_logits", d < 1e-5, ("logits differ by %.3g"):format(d))
  local worst, where = 0, "-"
  for name, g in pairs(cpu.grads) do
    local e = rel_diff(cuda.grads[name], g)
    if e > worst then worst, where = e, name end
  end
  check(act .. "_grads", worst < 1e-4, ("%s differs by %.3g"):format(where, worst))
  if cuda.gelu_passes then
    local want = (act == "gelu_new" and fused) and 0 or 1
    check(act .. "_forward_gelu_passes", cuda.gelu_passes == want,
      ("%d GELU passes in the forward, want %d"):format(cuda.gelu_passes, want))
    check(act .. "_backward_gelu_passes", cuda.dgelu_passes == want,
      ("%d GELU derivative passes in the backward, want %d"):format(cuda.dgelu_passes, want))
  end
end
-- bf16 full fine-tuning: trainable f32 weights under bf16 activations run as their kept bf16
-- copies, so the tanh forward rides in the epilogue there too; the backward keeps its passes
-- (a bf16 dh with the up-projection's trainable bias: see linear_backward_dgelu's slot)
do
  local cpu, cuda = run("gelu_new", "cpu", "bf16"), run("gelu_new", "cuda", "bf16")
  local d = rel_diff(cuda.logits, cpu.logits)
  check("bf16_full_logits", d < 3e-2, ("logits differ by %.3g"):format(d))
  local worst, where = 0, "-"
  for name, g in pairs(cpu.grads) do
    local e = rel_diff(cuda.grads[name], g)
    if e > worst then worst, where = e, name end
  end
  check("bf16_full_grads", worst < 3e-2, ("%s differs by %.3g"):format(where, worst))
  if cuda.gelu_passes then
    check("bf16_full_forward_gelu_passes", cuda.gelu_passes == (fused and 0 or 1),
      ("%d GELU passes in the forward"):format(cuda.gelu_passes))
    check("bf16_full_backward_gelu_passes", cuda.dgelu_passes == 1,
      ("%d GELU derivative passes in the backward"):format(cuda.dgelu_passes))
  end
end
h.finish()
