-- trainer.plan against measurement for the families other than BERT (tests/lua/test_plan.lua
-- holds BERT's): a small DistilBERT, a RoBERTa classifier (its first-token head) and an MPNet
-- classifier (its relative-position bias), the
-- predicted bytes per tag within 15 % (or 64 KiB) of the allocator's peaks of a steady-state
-- training step, full and under LoRA (the family's default targets), bf16 and checkpointing.
local memory = require("trainer.core.memory")
local registry = require("trainer.models.registry")
local optim = require("trainer.train.optim")
local losses = require("trainer.losses")
local amp = require("trainer.train.amp")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local plan = require("trainer.plan")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local shapes = {
  distilbert = { dim = 64, n_layers = 4, n_heads = 4, hidden_dim = 256, vocab_size = 500, max_position_embeddings = 512 },
  roberta = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256, vocab_size = 500,
              max_position_embeddings = 514, pad_token_id = 1, type_vocab_size = 1 },
  mpnet = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256, vocab_size = 500,
            max_position_embeddings = 514, layer_norm_eps = 1e-5, relative_attention_num_buckets = 32 },
}
local B, S = 8, 32

local function recipe(arch, spec)
  return {
    model = { arch = arch, config = shapes[arch], task = "classification", num_labels = 2, max_length = S },
    batch = { size = B, accumulate = 1 }, precision = spec.precision or "fp32",
    checkpoint = spec.checkpoint or false, lora = spec.lora or false, optim = { name = "adamw" },
    loss = { name = "cross_entropy" }, device = "cpu",
  }
end

-- The peaks by tag of one steady-state training step (after a warm-up step).
local function measure(arch, spec)
  local cfg, fam = registry.config(shapes[arch], "test", arch)
  local model = fam.build("classification", { config = cfg, seed = 1, num_labels = 2 })
  model:train()
  if spec.lora then lora.apply(model, spec.lora) end
  amp.prepare(model, spec.precision or "fp32")
  if spec.checkpoint then
    checkpoint.apply(model, spec.checkpoint, plan.estimate(recipe(arch, spec)).checkpoint_sizes)
  end
  local opt = optim.new(model, { name = "adamw", lr = 1e-5 })
  local loss = losses.new({ name = "cross_entropy" })
  local ids, mask, labels = {}, {}, {}
  for i = 1, B * S do ids[i] = 3 + (i * 7919) % 490; mask[i] = 1 end
  for i = 1, B do labels[i] = i % 2 end
  local input, attn = lib.int_matrix(ids, B, S), lib.int_matrix(mask, B, S)
  local function step(n)
    model.rng.step = n
    opt:zero_grad()
    local logits = model:forward({ input_ids = input, attention_mask = attn })
    loss:forward({ logits }, labels)
    local g = loss:backward()[1]
    model:backward(g)
    g:free(); logits:free()
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

local function compare(arch, spec)
  local got = measure(arch, spec)
  local est = plan.estimate(recipe(arch, spec))
  local tags = { "weights", "grads", "optimizer", "activations" }
  if plan.cpu_gemm_library() == "onednn" and est.packed_weight_bytes then tags[#tags + 1] = "workspace" end
  for _, tag in ipairs(tags) do
    local m, p = got[tag], est.by_tag[tag]
    local tol = 0.15 * math.max(m, 64 * 1024)
    print(("# %s %-12s predicted %10d measured %10d (%+.1f%%)"):format(arch, tag, p, m, 100 * (p - m) / math.max(m, 1)))
    assert(math.abs(p - m) <= tol, ("%s %s: predicted %d bytes, measured %d (%.1f%%)"):format(arch, tag, p, m,
      100 * (p - m) / math.max(m, 1)))
  end
end

local lora_default = { r = 8, alpha = 16 }   -- targets: the family's (q_lin, v_lin; query, value)

return {
  { "distilbert_fp32", function() compare("distilbert", {}) end },
  { "distilbert_lora", function() compare("distilbert", { lora = lora_default }) end },
  { "distilbert_bf16_checkpoint_lora", function()
    compare("distilbert", { lora = lora_default, precision = "bf16", checkpoint = "auto" })
  end },
  { "distilbert_lora_head_saved", function()
    compare("distilbert", { lora = { r = 8, alpha = 16, modules_to_save = { "pre_classifier", "classifier" } } })
  end },
  { "roberta_head_fp32", function() compare("roberta", {}) end },
  { "roberta_head_lora", function() compare("roberta", { lora = { r = 8, alpha = 16, modules_to_save = { "classifier" } } }) end },
  -- MPNet: its bias table beside the embeddings, LoRA on q and v
  { "mpnet_fp32", function() compare("mpnet", {}) end },
  { "mpnet_lora", function() compare("mpnet", { lora = lora_default }) end },
  { "mpnet_bf16_checkpoint_lora", function()
    compare("mpnet", { lora = lora_default, precision = "bf16", checkpoint = "auto" })
  end },
  { "mpnet_checkpoint_fp32", function() compare("mpnet", { checkpoint = "auto" }) end },
}
