-- bench/plan_vs_peak.lua: `trainer plan`'s total against a measured step's peak allocation, for
-- every model family and the bench's configurations, at one shape (never a test: figures depend
-- on the machine's products and its allocator's rounding; tests/lua/test_plan*.lua hold the
-- tolerances on small models).
--   ./trainer run bench/plan_vs_peak.lua [minilm|bert-base] [rows] [tokens]
-- The step is tests/lua/plan_measure.lua's (a two-label classifier of the family at
-- bench/families.json's config, AdamW, one warm-up step, then the measured one), the plan is
-- trainer.plan.estimate of the same recipe. Prints, per family and configuration, the plan's
-- total, the measured peak, the plan's tags' sum, and the workspace planned and measured.
local memory = require("trainer.core.memory")
local plan = require("trainer.plan")
local root = require("trainer.native").root()
local pm = dofile(root .. "/tests/lua/plan_measure.lua")
local shapes = dofile(root .. "/bench/family_shapes.lua")

local which = arg and arg[1] or "minilm"
if which ~= "minilm" and which ~= "bert-base" then
  error("bench/plan_vs_peak.lua: the shape is minilm or bert-base, got " .. tostring(which), 0)
end
pm.B, pm.S = tonumber(arg and arg[2]) or 32, tonumber(arg and arg[3]) or 128
local opt = which == "bert-base" and { hidden = 768, layers = 12, heads = 12, intermediate = 3072, seq = pm.S }
  or { hidden = 384, layers = 6, heads = 12, intermediate = 1536, seq = pm.S }

local configs = {
  { "fp32-full", {} },
  { "fp32-lora", { lora = true } },
  { "bf16-ckpt-lora", { lora = true, precision = "bf16", checkpoint = "auto" } },
}
print(("%s shape, %d x %d; MB"):format(which, pm.B, pm.S))
print(("%-11s %-15s %9s %9s %8s %9s %9s %9s"):format("family", "config", "plan", "peak", "plan/pk", "tags' sum",
  "ws plan", "ws peak"))
for _, family in ipairs({ "bert", "distilbert", "mpnet", "modernbert" }) do
  local raw = shapes.config(family, opt)
  raw.model_type = nil
  for _, c in ipairs(configs) do
    local spec = {}
    for k, v in pairs(c[2]) do spec[k] = v end
    if spec.lora then spec.lora = { r = 8, alpha = 16, targets = shapes.lora_targets(family) } end
    local tags, peak = pm.measure(family, raw, spec)
    local est = plan.estimate(pm.recipe(family, raw, spec))
    print(("%-11s %-15s %9.1f %9.1f %7.1f%% %9.1f %9.1f %9.1f"):format(family, c[1], est.total_bytes / 1e6,
      peak / 1e6, 100 * (est.total_bytes - peak) / peak, est.tags_sum_bytes / 1e6, est.by_tag.workspace / 1e6,
      (tags.workspace or 0) / 1e6))
  end
end
memory.empty_cache()
