-- checkpoint = "auto" and the plan's table of checkpoint choices: the peak
-- arithmetic of a segmentation, "auto" as the least peak of every even segmentation (and,
-- for BERT-large at 512 under the flagship's bf16 + LoRA, below the recipe's 4 segments and
-- no worse than one per layer), the plan's sizes applied to the model, the choices in the
-- text and the JSON, and on device = "cuda" cuBLASLt's 32 MiB workspace and the CUDA
-- context beside (not in) the total.
local plan = require("trainer.plan")
local gc = require("trainer.train.grad_checkpoint")
local bert = require("trainer.models.bert")
local recipe_mod = require("trainer.recipe")

local preset = { "model.from=nil", "model.arch=bert", "model.config=bert-large" }

local function plan_of(more)
  local args = {}
  for _, v in ipairs(preset) do args[#args + 1] = v end
  for _, v in ipairs(more or {}) do args[#args + 1] = v end
  local r = recipe_mod.load("recipes/scandi_lora.lua", args)
  return plan.estimate(r.recipe), r
end

local function choice(p, n)
  for _, c in ipairs(p.checkpoint_choices) do
    if (c.sizes and #c.sizes or 0) == n and (n > 0 or c.spec == false) then return c end
  end
end

return {
  { "peak_of_a_segmentation", function()
    local cost = { per_layer = 10, boundary = 1, credit = 2 }
    -- backward of segment 2 (1 layer, both inputs kept) then segment 1 (2 layers, one input)
    assert(gc.peak({ 2, 1 }, cost) == math.max(1 + 20 - 2, 2 + 10 - 2))
    assert(gc.peak({ 1, 1, 1 }, cost) == 3 + 10 - 2)
  end },
  { "auto_is_the_least_peak", function()
    -- boundaries cheap against a layer: one layer per segment
    local sizes = gc.segments(24, "auto", { per_layer = 1000, boundary = 1 })
    assert(#sizes == 24, "#sizes " .. #sizes)
    -- boundaries as dear as a layer: few segments
    sizes = gc.segments(16, "auto", { per_layer = 10, boundary = 10 })
    assert(#sizes <= 4, "#sizes " .. #sizes)
    -- whatever the cost, no even segmentation beats it
    for _, cost in ipairs({ { per_layer = 160, boundary = 16, credit = 16 }, { per_layer = 7, boundary = 3 } }) do
      local best, pk = gc.best(24, cost)
      for n = 1, 24 do assert(gc.peak(gc.segments(24, { segments = n }), cost) >= pk, "n " .. n) end
      assert(gc.peak(best, cost) == pk)
    end
    -- without a cost (a model checkpointed outside a run): about sqrt(L)
    assert(#gc.segments(24, "auto") == 5)
  end },
  { "auto_for_bert_large_512", function()
    for _, cols in ipairs({ '{"anchor","positive","negative"}', '{"anchor","positive"}' }) do
      local p = plan_of({ "checkpoint=auto", "data.columns=" .. cols, "device=cuda" })
      local auto = p.checkpoint_sizes
      assert(auto and #auto >= 12, "auto picks " .. (auto and #auto or 0) .. " segments")
      local a = p.by_tag.activations
      for _, c in ipairs(p.checkpoint_choices) do
        assert(c.activations >= a, ("%s segments: %d below auto's %d"):format(c.sizes and #c.sizes or 0, c.activations, a))
      end
      assert(a < choice(p, 4).activations and a <= choice(p, 24).activations)
      assert(choice(p, 0).activations > choice(p, 4).activations, "no checkpointing keeps the most")
    end
  end },
  { "apply_uses_the_planned_sizes", function()
    local cfg = bert.config({ hidden_size = 16, num_hidden_layers = 3, num_attention_heads = 2, intermediate_size = 32,
      vocab_size = 40, max_position_embeddings = 16 }, "tiny")
    local m = bert.SentenceEncoder.new(bert.BertModel.new(cfg, { seed = 1, pooler = false }), {})
    local sizes = gc.apply(m, "auto", { 2, 1 })
    assert(#sizes == 2 and sizes[1] == 2 and sizes[2] == 1)
    -- planned sizes that do not cover the layers are ignored, and so are they for other specs
    assert(#gc.apply(m, "auto", { 1, 1 }) == 2)   -- sqrt(3) rounds to 2
    assert(#gc.apply(m, { segments = 3 }, { 2, 1 }) == 3)
    m:free()
  end },
  { "plan_prints_the_choices", function()
    local p = plan_of({ "device=cuda" })
    local text = plan.format(p, nil, "recipes/scandi_lora.lua")
    assert(text:find("checkpoint choices for this shape (24 layers", 1, true), text)
    assert(text:find("{ segments = 4 }     6 ", 1, true) and text:find("<- this recipe", 1, true), text)
    assert(text:find('what "auto" picks', 1, true), text)
    assert(text:find("\n  false ", 1, true), text)
    -- cuBLASLt's 32 MiB and the bf16 copies of the LoRA factors (786432 f32 parameters)
    assert(text:find("workspace       33.50 MiB", 1, true), text)
    assert(text:find("+ context", 1, true) and text:find("outside the allocator", 1, true), text)
    assert(p.by_tag.workspace == 32 * 2 ^ 20 + 2 * p.trainable_parameters and p.trainable_parameters == 786432)
    local total = 0
    for _, v in pairs(p.by_tag) do total = total + v end
    -- (the total, the step's peak, is at most the tags' sum: the grads meet part of the activations)
    assert(total == p.tags_sum_bytes and p.total_bytes <= total, "the context is not in the total")
    local j = plan.json(p)
    assert(j.cuda_context_bytes == plan.CUDA_CONTEXT_BYTES and #j.checkpoint.choices == #p.checkpoint_choices)
    local autos = 0
    for _, c in ipairs(j.checkpoint.choices) do if c.auto then autos = autos + 1 end end
    assert(autos == 1, "one choice is auto's")
    -- on the CPU: no context line
    local cpu = plan.format(plan_of({ "device=cpu" }), nil, "r")
    assert(not cpu:find("+ context", 1, true), cpu)
  end },
}
