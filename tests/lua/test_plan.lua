-- trainer.plan against measurement: for a small BERT-shaped classifier, the predicted bytes
-- per tag must be within 15 % of the allocator's measured peaks of a real training step,
-- under each memory technique (the same step bench/memory.lua times).
local T = require("trainer.tensor")
local memory = require("trainer.memory")
local bert = require("trainer.models.bert")
local optim = require("trainer.optim")
local losses = require("trainer.losses")
local amp = require("trainer.amp")
local ops = require("trainer.ops")
local lora = require("trainer.lora")
local checkpoint = require("trainer.checkpoint")
local plan = require("trainer.plan")

local shape = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256,
                vocab_size = 500, max_position_embeddings = 512 }
local B, S = 8, 32

local function int_matrix(values, rows, cols)
  local flat = T.from_table(values, { dtype = "i32" })
  local t = flat:reshape({ rows, cols })
  flat:free()
  return t
end

-- The peaks by tag of one steady-state training step (after a warm-up step): as run.lua
-- trains, batch.accumulate micro-batches of batch.size rows each, then one update.
local function measure(spec)
  local cfg = bert.config(shape, "test")
  local model = bert.SequenceClassifier.new(bert.BertModel.new(cfg, { seed = 1 }), 2, { seed = 1 })
  model:train()
  if spec.lora then lora.apply(model, spec.lora) end
  amp.prepare(model, spec.precision or "fp32")
  if spec.checkpoint then checkpoint.apply(model, spec.checkpoint) end
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

local function recipe(spec)
  return {
    model = { arch = "bert", config = shape, task = "classification", num_labels = 2, max_length = S },
    batch = { size = spec.size or B, accumulate = spec.accumulate or 1 }, precision = spec.precision or "fp32",
    checkpoint = spec.checkpoint or false, lora = spec.lora or false, optim = { name = "adamw" },
    loss = { name = "cross_entropy" }, device = "cpu",
  }
end

local function compare(spec)
  local got = measure(spec)
  local want = plan.estimate(recipe(spec)).by_tag
  for _, tag in ipairs({ "weights", "grads", "optimizer", "activations" }) do
    local m, p = got[tag], want[tag]
    local tol = 0.15 * math.max(m, 64 * 1024)      -- tiny tags: a 64 KiB floor
    print(("# %-12s predicted %10d measured %10d (%+.1f%%)"):format(tag, p, m, 100 * (p - m) / math.max(m, 1)))
    assert(math.abs(p - m) <= tol, ("%s: predicted %d bytes, measured %d (%.1f%%)"):format(tag, p, m,
      100 * (p - m) / math.max(m, 1)))
  end
end

local lora_qv = { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" }, bias = "none" }

return {
  { "fp32_baseline", function() compare({}) end },
  -- batch.size rows per micro-batch whatever batch.accumulate is (the plan once divided
  -- batch.size by it and predicted a quarter of the measured activations)
  { "accumulation_keeps_batch_size", function() compare({ accumulate = 4 }) end },
  { "accumulation_smaller_micro_batch", function() compare({ size = 2, accumulate = 4 }) end },
  { "accumulation_adds_no_activations", function()
    local one = plan.estimate(recipe({ size = 16 }))
    local four = plan.estimate(recipe({ size = 16, accumulate = 4 }))
    assert(four.micro_batch == 16, "micro-batch " .. four.micro_batch)
    assert(four.by_tag.activations == one.by_tag.activations,
      ("activations %d with accumulate = 4, %d without"):format(four.by_tag.activations, one.by_tag.activations))
  end },
  { "checkpointing_auto", function() compare({ checkpoint = "auto" }) end },
  { "checkpointing_segments", function() compare({ checkpoint = { segments = 4 } }) end },
  { "bf16", function() compare({ precision = "bf16" }) end },
  { "lora", function() compare({ lora = lora_qv }) end },
  { "all_combined", function() compare({ lora = lora_qv, precision = "bf16", checkpoint = "auto", accumulate = 4 }) end },
  { "json_contract", function()
    local p = plan.estimate(recipe({}))
    local j = plan.json(p, 2 ^ 30)
    assert(j.device == "cpu" and j.total_bytes == p.total_bytes and j.budget_bytes == 2 ^ 30 and j.fits == true)
    for _, tag in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
      assert(type(j.by_tag[tag]) == "number", tag)
    end
    assert(plan.json(p, 1024).fits == false)
  end },
}
