-- trainer.plan against measurement for a small ModernBERT classifier (local layers with a window
-- narrower than the sequence): the predicted bytes per tag within 15 % of the allocator's
-- measured peaks of a real training step, under each memory technique (as test_plan.lua for BERT).
local memory = require("trainer.core.memory")
local registry = require("trainer.models.registry")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local ops = require("trainer.core.ops")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local plan = require("trainer.plan")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local shape = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 128,
                vocab_size = 500, pad_token_id = 0, local_attention = 16, global_attn_every_n_layers = 2 }
local B, S = 8, 32

local int_matrix = lib.int_matrix

local function recipe(spec)
  return {
    model = { arch = "modernbert", config = shape, task = "classification", num_labels = 2, max_length = S },
    batch = { size = spec.size or B, accumulate = spec.accumulate or 1 }, precision = spec.precision or "fp32",
    checkpoint = spec.checkpoint or false, lora = spec.lora or false, optim = { name = "adamw" },
    loss = { name = "cross_entropy" }, device = "cpu",
  }
end

-- The peaks by tag of one steady-state training step (after a warm-up step): as run.lua
-- trains, batch.accumulate micro-batches of batch.size rows each, then one update.
local function measure(spec)
  local cfg, fam = registry.config(shape, "test", "modernbert")
  local model = fam.build("classification", { config = cfg, seed = 1, num_labels = 2 })
  model:train()
  if spec.lora then lora.apply(model, spec.lora) end
  amp.prepare(model, spec.precision or "fp32")
  -- "auto" as a run applies it: the segmentation the plan chose for this shape
  if spec.checkpoint then checkpoint.apply(model, spec.checkpoint, plan.estimate(recipe(spec)).checkpoint_sizes) end
  local opt = optim.new(model, { name = "adamw", lr = 1e-5 })
  local loss = losses.new({ name = "cross_entropy" })
  local k = spec.accumulate or 1
  local per = spec.size or B
  local rows = per * k
  local ids, mask, labels = {}, {}, {}
  for i = 1, rows * S do ids[i] = 3 + (i * 7919) % 490; mask[i] = 1 end
  for i = 1, rows do labels[i] = i % 2 end
  local input = int_matrix(ids, rows, S)
  local attn = int_matrix(mask, rows, S)
  local function step(n)
    model.rng.step = n
    opt:zero_grad()
    for i = 0, k - 1 do
      local mb = { input_ids = input:narrow(i * per, per), attention_mask = attn:narrow(i * per, per) }
      local lab = {}
      for j = 1, per do lab[j] = labels[i * per + j] end
      local logits = model:forward(mb)
      loss:forward({ logits }, lab)
      local g = loss:backward()[1]
      ops.scale_(g, 1 / k)
      model:backward(g)
      g:free(); logits:free(); mb.input_ids:free(); mb.attention_mask:free()
    end
    opt:step()
  end
  step(0)
  memory.reset_peak()
  step(1)
  local peaks = memory.stats().peak_by_tag
  opt:free(); loss:free(); model:free(); input:free(); attn:free()
  memory.empty_cache()
  return peaks
end


local function compare(spec)
  local got = measure(spec)
  local est = plan.estimate(recipe(spec))
  local want = est.by_tag
  -- workspace too where oneDNN packs the weights (f32 ones: then it is mostly the packs);
  -- otherwise workspace is transient staging the plan bounds from above
  local tags = { "weights", "grads", "optimizer", "activations" }
  if plan.cpu_gemm_library() == "onednn" and est.packed_weight_bytes then tags[#tags + 1] = "workspace" end
  for _, tag in ipairs(tags) do
    local m, p = got[tag], want[tag]
    local tol = 0.15 * math.max(m, 64 * 1024)      -- tiny tags: a 64 KiB floor
    print(("# %-12s predicted %10d measured %10d (%+.1f%%)"):format(tag, p, m, 100 * (p - m) / math.max(m, 1)))
    assert(math.abs(p - m) <= tol, ("%s: predicted %d bytes, measured %d (%.1f%%)"):format(tag, p, m,
      100 * (p - m) / math.max(m, 1)))
  end
end

local lora_default = { r = 8, alpha = 16, dropout = 0.1, bias = "none" }   -- the family's targets

return {
  { "fp32_baseline", function() compare({}) end },
  { "checkpointing_auto", function() compare({ checkpoint = "auto" }) end },
  { "bf16", function() compare({ precision = "bf16" }) end },
  { "lora", function() compare({ lora = lora_default }) end },
  { "all_combined", function() compare({ lora = lora_default, precision = "bf16", checkpoint = "auto", accumulate = 4 }) end },
}
