-- trainer.plan against measurement: for a small BERT-shaped classifier, the predicted bytes
-- per tag must be within 15 % of the allocator's measured peaks of a real training step,
-- under each memory technique (the same step bench/memory.lua times).
local plan = require("trainer.plan")
local recipes = require("trainer.recipe")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local pm = dofile(require("trainer.native").root() .. "/tests/lua/plan_measure.lua")

local shape = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256,
                vocab_size = 500, max_position_embeddings = 512 }
local function recipe(spec) return pm.recipe("bert", shape, spec) end
local function compare(spec) pm.compare("bert", shape, spec) end

-- The flagship recipe with a preset shape (the model folder is not downloaded in tests).
local flagship = "recipes/scandi_lora.lua"
local preset = { "model.from=nil", "model.arch=bert", "model.config=bert-large" }
local with = lib.concat
-- (the OpenBLAS path's figures: oneDNN's packed weights would move the flagship's totals on
-- a machine that has it; "packed_weights_in_workspace" checks those)
local function plan_of(path, overrides, cpu_gemm)
  return plan.estimate(recipes.load(path, overrides).recipe, { cuda_available = false, cpu_gemm = cpu_gemm or "openblas" })
end

-- Every alternative printed is planned: its overrides, given to the recipe loader as a user
-- would paste them, validate and give the plan it claims, within the budget.
local function check_alternatives(path, overrides, budget)
  local alts = plan.alternatives(plan_of(path, overrides), budget)
  for _, a in ipairs(alts) do
    local p = plan_of(path, with(overrides, a.args))
    assert(p.total_bytes == a.total_bytes, ("%s: claimed %d bytes, planned %d"):format(a.text, a.total_bytes, p.total_bytes))
    assert(a.fits == (p.total_bytes <= budget), a.text)
  end
  return alts
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
  -- the total is the step's peak: without accumulation the grads are made as the backward
  -- frees the activations, so it is below the tags' sum by most of the grads (all but the
  -- head's and one layer's at the backward's start); in micro-batches the grads outlive the
  -- forward and it is the sum
  { "total_is_the_step_peak", function()
    local one, four = plan.estimate(recipe({ size = 16 })), plan.estimate(recipe({ size = 16, accumulate = 4 }))
    local g = one.by_tag.grads
    assert(one.tags_sum_bytes - one.total_bytes >= 0.5 * g,
      ("total %d, tags' sum %d, grads %d"):format(one.total_bytes, one.tags_sum_bytes, g))
    assert(four.total_bytes == four.tags_sum_bytes, ("accumulate 4: total %d, sum %d"):format(four.total_bytes,
      four.tags_sum_bytes))
    -- every checkpoint choice's total is its own step's peak, at most its sum
    for _, c in ipairs(one.checkpoint_choices) do
      assert(c.total_bytes <= one.tags_sum_bytes - one.by_tag.activations + c.activations, "a choice over its sum")
    end
  end },
  { "checkpointing_auto", function() compare({ checkpoint = "auto" }) end },
  { "checkpointing_segments", function() compare({ checkpoint = { segments = 4 } }) end },
  { "bf16", function() compare({ precision = "bf16" }) end },
  { "lora", function() compare({ lora = lora_qv }) end },
  { "all_combined", function() compare({ lora = lora_qv, precision = "bf16", checkpoint = "auto", accumulate = 4 }) end },
  -- oneDNN's packed Linear weights are workspace (core/cpu_device/cpu_gemm.h), none on a GPU or
  -- on OpenBLAS. Planned for oneDNN (opts.cpu_gemm): its blocked layout's, two f32 copies of
  -- every Linear weight with both sides >= 32; kept for the run where they serve more than
  -- one product (a trained weight's under accumulation), else made per product, so the
  -- largest one counts (a frozen weight's: Optimizer:transient_packs).
  { "packed_weights_in_workspace", function()
    -- bert-large fully fine-tuned in two micro-batches: per layer 4 x 1024^2 + 2 x 1024 x 4096
    -- weights, 2 copies x 4 bytes each, kept
    local over = with(preset, { "precision=fp32", "lora=nil", "batch.accumulate=2" })
    local blas, dnnl = plan_of(flagship, over, "openblas"), plan_of(flagship, over, "onednn")
    local want = 24 * 2 * 4 * (4 * 1024 * 1024 + 2 * 1024 * 4096)
    assert(dnnl.packed_weight_bytes == want, tostring(dnnl.packed_weight_bytes))
    assert(dnnl.by_tag.workspace - blas.by_tag.workspace == want,
      ("workspace %d with oneDNN, %d without"):format(dnnl.by_tag.workspace, blas.by_tag.workspace))
    assert(dnnl.total_bytes - blas.total_bytes == want and blas.packed_weight_bytes == nil)
    local text = plan.format(dnnl, nil, flagship)
    assert(text:find("workspace holds 2.25 GiB of Linear weights packed for oneDNN (f32, forward and input gradient;",
      1, true), text)
    -- the same weights frozen (LoRA) or trained without accumulation: one [4096, 1024] pack at a time
    local one = 4 * 1024 * 4096
    for _, o in ipairs({ { "precision=fp32" }, { "precision=fp32", "lora=nil" } }) do
      local p = plan_of(flagship, with(preset, o), "onednn")
      assert(p.packed_weight_bytes == one, ("%s: %s"):format(table.concat(o, " "), tostring(p.packed_weight_bytes)))
      local t = plan.format(p, nil, flagship)
      assert(t:find("(f32, forward and input gradient; each made for its product and freed after it, so one at a time;",
        1, true), t)
    end
    -- frozen weights beside a trained head kept under accumulation (a RoBERTa classifier with
    -- its dense Linear saved): the head's two [64, 64] packs kept, then the largest frozen pack
    local rshape = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256,
                     vocab_size = 500, max_position_embeddings = 514, pad_token_id = 1, type_vocab_size = 1 }
    local head = plan.estimate(pm.recipe("roberta", rshape, { accumulate = 2,
      lora = { r = 8, alpha = 16, modules_to_save = { "classifier" } } }), { cuda_available = false, cpu_gemm = "onednn" })
    assert(head.packed_weight_bytes == 2 * 4 * 64 * 64 + 4 * 256 * 64 and head.packed_transient == "frozen",
      ("%s %s"):format(tostring(head.packed_weight_bytes), tostring(head.packed_transient)))
    assert(plan.format(head, nil, "r.lua"):find("; a frozen weight's made for each product and freed after it;", 1, true))
    local gpu = plan.estimate(recipes.load(flagship, over).recipe, { cuda_available = true, cpu_gemm = "onednn" })
    assert(gpu.packed_weight_bytes == nil, "packed weights planned on a GPU")
    -- half weights run unpacked (core/cpu_device/cpu_gemm.c): the flagship as written is bf16
    assert(plan_of(flagship, preset, "onednn").packed_weight_bytes == nil, "packed half weights planned")
    assert(plan.blocked_packed_weight_bytes(8, 384) == 0 and plan.blocked_packed_weight_bytes(384, 384) == 2 * 4 * 384 * 384)
    -- tests/c/test_cpu_gemm.c measures this one: [96, 128] packs as 128 x 128 and 128 x 96
    local t, f, g = plan.blocked_packed_weight_bytes(96, 128)
    assert(t == 65536 + 49152 and f == 65536 and g == 49152, ("%d = %d + %d"):format(t, f, g))
  end },
  -- This process's plan counts the packs its runtime will make (tr_cpu_linear_pack_bytes):
  -- both products' copies where oneDNN's layout is blocked, the forward's only where it is
  -- plain (AVX2: the input gradient reads the weight as stored), none on OpenBLAS.
  { "packed_weights_of_this_process", function()
    local over = with(preset, { "precision=fp32", "lora=nil", "batch.accumulate=2" })
    local here = plan.estimate(recipes.load(flagship, over).recipe, { cuda_available = false })
    local t, f, g = plan.packed_weight_bytes(96, 128)
    assert(t == f + g)
    if plan.cpu_gemm_library() ~= "onednn" then
      assert(t == 0 and here.packed_weight_bytes == nil, tostring(here.packed_weight_bytes))
      return
    end
    local _, bf, bg = plan.blocked_packed_weight_bytes(96, 128)
    assert((f == bf and g == bg) or (f == 4 * 96 * 128 and g == 0),
      ("[96, 128]: forward %d, input gradient %d bytes"):format(f, g))
    assert(select(1, plan.packed_weight_bytes(8, 384)) == 0, "a side under 32 packed")
    local want = 0   -- bert-large's layers (the flagship has no head Linear, as above)
    for _, s in ipairs({ { 1024, 1024 }, { 1024, 1024 }, { 1024, 1024 }, { 1024, 1024 }, { 4096, 1024 }, { 1024, 4096 } }) do
      want = want + 24 * plan.packed_weight_bytes(s[1], s[2])
    end
    assert(here.packed_weight_bytes == want, ("planned %s, the runtime packs %d"):format(tostring(here.packed_weight_bytes), want))
    local text = plan.format(here, nil, flagship)
    assert(text:find(g == 0 and "(f32, forward only: the other product reads the weights as stored;"
      or "(f32, forward and input gradient;", 1, true), text)
  end },
  { "json_contract", function()
    local p = plan.estimate(recipe({}))
    local j = plan.json(p, 2 ^ 30)
    assert(j.device == "cpu" and j.total_bytes == p.total_bytes and j.budget_bytes == 2 ^ 30 and j.fits == true)
    for _, tag in ipairs({ "weights", "grads", "optimizer", "activations", "workspace" }) do
      assert(type(j.by_tag[tag]) == "number", tag)
    end
    assert(plan.json(p, 1024).fits == false)
  end },

  -- item 9: over budget, the changes that fit, planned, and none the recipe already has
  { "alternatives_for_the_flagship", function()
    local budget = 2 * 2 ^ 30
    local alts = check_alternatives(flagship, preset, budget)
    assert(#alts >= 2, "expected at least two alternatives, got " .. #alts)
    local texts = {}
    for _, a in ipairs(alts) do
      assert(a.fits, a.text .. " does not fit")
      texts[#texts + 1] = a.text
      -- scandi_lora already has bf16, LoRA and checkpointing
      assert(not a.text:find("precision=", 1, true) and not a.text:find("lora=", 1, true), a.text)
    end
    local all = table.concat(texts, " | ")
    assert(all:find("batch.size=8 batch.accumulate=2", 1, true), all)
    assert(all:find("loss.cached=true", 1, true), all)
    local text = plan.format(plan_of(flagship, preset), budget, flagship)
    assert(text:find("  batch.size=8 batch.accumulate=2 -> 1.48 GiB (fits;", 1, true), text)
    assert(not text:find("shrink activations with checkpoint", 1, true), text)
    local j = plan.json(plan_of(flagship, preset), budget)
    assert(j.fits == false and #j.alternatives == #alts and j.alternatives[1].overrides[1], "json alternatives")
  end },
  { "alternatives_of_a_plain_recipe", function()
    -- an fp32 full fine-tune: bf16, checkpointing, Adafactor and LoRA are all on offer
    local over = with(preset, { "precision=fp32", "lora=false", "checkpoint=false", "batch.size=8" })
    local base = plan_of(flagship, over)
    local alts = check_alternatives(flagship, over, base.total_bytes - 1)
    local seen = {}
    for _, a in ipairs(alts) do seen[a.args[1]:match("^[^=.]+")] = a.fits end
    for _, k in ipairs({ "precision", "checkpoint", "loss", "batch", "optim", "lora" }) do
      assert(seen[k], "no fitting alternative for " .. k)
    end
  end },
  { "alternatives_combined_when_no_single_fits", function()
    local over = with(preset, { "precision=fp32", "lora=false", "checkpoint=false" })
    local alts = check_alternatives(flagship, over, 1.5 * 2 ^ 30)
    assert(#alts == 1 and alts[1].combined and alts[1].fits, "expected one fitting combination")
    assert(#alts[1].args >= 3, alts[1].text)
    local text = plan.format(plan_of(flagship, over), 1.5 * 2 ^ 30, flagship)
    assert(text:find("No single change fits; together these do", 1, true), text)
    -- nothing reaches 100 MiB: said so, with the smallest plan reached
    local none = plan.format(plan_of(flagship, over), 100 * 2 ^ 20, flagship)
    assert(none:find("Nothing trainer plan knows of fits", 1, true) and none:find("model.max_length (now 512)", 1, true), none)
  end },
  { "budget_names_the_file_and_key", function()
    local n, source = plan.budget(recipes.load(flagship, preset))
    assert(n == 24 * 2 ^ 30, tostring(n))
    assert(source == "memory.limit in recipes/base/lora_bf16.lua, from gpu_budget in recipes/base/sizes.lua", source)
    local _, src2 = plan.budget(recipes.load(flagship, with(preset, { "memory.limit=8GiB" })))
    assert(src2 == "memory.limit on the command line", src2)
    assert(plan.budget(recipes.load(flagship, with(preset, { "memory=nil" }))) == nil)
    local text = plan.format(plan_of(flagship, preset), n, flagship, { budget_source = source })
    assert(text:find("; the budget is memory.limit in recipes/base/lora_bf16.lua, from gpu_budget in recipes/base/sizes.lua", 1, true), text)
  end },
}
