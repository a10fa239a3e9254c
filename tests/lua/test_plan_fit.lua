-- tests/lua/test_plan_fit.lua — the predicted step time (trainer.plan.time) and the choice of
-- batch.size = "auto" / memory.fit (trainer.plan.fit), planned only: nothing trains here
-- (tests/cli/test_memory_fit.sh and tests/cudacpu/train_fit.sh run the choices).
local plan = require("trainer.plan")
local time = require("trainer.plan.time")
local fit = require("trainer.plan.fit")
local cards = require("trainer.plan.cards")
local errors = require("trainer.core.errors")
local schema = require("trainer.recipe.schema")

local MiB = 2 ^ 20
-- rates as the probe measured them on a 2-core AVX2 EPYC, fixed so the test is the machine's own
local RATES = { flops = 178e9, bytes = 40e9, rows_half = 102, op_seconds = 122e-6, token_seconds = 16.4e-9,
                token_half_seconds = 33.9e-9, product_half = 1.10 }

local function recipe(over)
  local r = {
    model = { arch = "bert", config = { hidden_size = 128, num_hidden_layers = 4, num_attention_heads = 4,
      intermediate_size = 512, vocab_size = 500, max_position_embeddings = 512 }, task = "classification",
      num_labels = 3, max_length = 64 },
    loss = { name = "cross_entropy" }, optim = { name = "adamw" }, batch = { size = 32 }, device = "cpu",
  }
  for k, v in pairs(over or {}) do
    local cur, parts = r, {}
    for p in k:gmatch("[^%.]+") do parts[#parts + 1] = p end
    for i = 1, #parts - 1 do cur[parts[i]] = cur[parts[i]] or {} cur = cur[parts[i]] end
    cur[parts[#parts]] = v
  end
  return r
end

local function seconds(over)
  local p = plan.estimate(recipe(over), { cpu_gemm = "openblas", cpu_bf16_native = false })
  return time.predict(p, RATES).seconds, p
end

local function choose(over, budget)
  return fit.choose(recipe(over), { device = "cpu", budget = budget, budget_what = "test", rates = RATES,
    estimate_opts = { cpu_gemm = "openblas", cpu_bf16_native = false } })
end

local function raises_oom(fn)
  local ok, e = pcall(fn)
  assert(not ok, "no error")
  assert(errors.is_user_error(e) and e.kind == "oom", tostring(e and e.msg or e))
  return e.msg
end

return {
  { "each_saving_has_a_price", function()
    local base = seconds()
    local ck = seconds({ checkpoint = "auto" })
    local acc = seconds({ ["batch.size"] = 8, ["batch.accumulate"] = 4 })
    local half = seconds({ precision = "bf16" })
    assert(ck > 1.15 * base and ck < 1.6 * base, ("checkpoint %.3f vs %.3f"):format(ck, base))
    assert(acc > base, "accumulation costs calls")
    assert(half > base, "bf16 on a CPU without native bf16 converts")
  end },
  { "the_recompute_of_a_frozen_base_costs_more_relatively", function()
    local l = { r = 8, alpha = 16, targets = { "query", "value" } }
    local full = seconds({ checkpoint = "auto" }) / seconds()
    local lora = seconds({ checkpoint = "auto", lora = l }) / seconds({ lora = l })
    assert(lora > full, ("lora %.3f, full %.3f"):format(lora, full))
  end },
  { "a_card_s_rates_come_from_its_table_row", function()
    local r = cards.rates_of({ name = "NVIDIA A100-SXM4-80GB" })
    assert(r and r.name == "A100 80 GB" and r.half_tflops == 312, r and r.name)
    assert(cards.rates_of({ name = "NVIDIA H100 80GB HBM3" }).name == "H100 80 GB")
    assert(cards.rates_of({ name = "Some Future Card" }) == nil)
    local est = time.card_rates({ name = "x", major = 9, minor = 0, cc = "9.0", multiprocessors = 132 })
    assert(est.half_flops > est.flops and est.source:find("estimated", 1, true), est.source)
  end },
  { "a_planned_card_s_step_is_faster_in_half", function()
    local r = recipe({ device = "cuda" })
    local p = plan.estimate(r, { cuda_available = true })
    p.card = cards.find("a10")
    local rates = time.rates(p)
    local r2 = schema.copy(r) r2.precision = "bf16"
    local p2 = plan.estimate(r2, { cuda_available = true })
    p2.card = p.card
    assert(time.predict(p2, rates).seconds < time.predict(p, rates).seconds)
  end },
  { "auto_takes_the_largest_micro_batch_that_fits_keeping_the_effective_batch", function()
    local rec = choose({ ["batch.size"] = "auto", ["batch.effective"] = 32 }, 70 * MiB)
    local b, acc = rec.recipe.batch.size, rec.recipe.batch.accumulate
    assert(b * acc == 32, b .. " x " .. acc)
    assert(rec.plan.total_bytes <= fit.HEADROOM * 70 * MiB - fit.SEGMENT_SLACK)
    -- the next larger divisor does not fit
    local bigger = plan.estimate(recipe({ ["batch.size"] = b * 2 }), { cpu_gemm = "openblas" })
    assert(bigger.total_bytes > fit.HEADROOM * 70 * MiB - fit.SEGMENT_SLACK)
    assert(rec.recipe.precision == "fp32" and rec.recipe.checkpoint == false, "auto alone changes nothing else")
  end },
  { "auto_without_batch_effective_keeps_16_x_accumulate", function()
    local rec = choose({ ["batch.size"] = "auto", ["batch.accumulate"] = 2 }, 200 * MiB)
    assert(rec.recipe.batch.size * rec.recipe.batch.accumulate == 32)
  end },
  { "memory_fit_keeps_a_recipe_that_fits", function()
    local rec = choose({ ["memory.fit"] = true }, 400 * MiB)
    assert(rec.fits_as_written and #rec.changes == 0)
  end },
  { "memory_fit_takes_the_fastest_that_fits", function()
    local rec = choose({ ["memory.fit"] = true }, 70 * MiB)
    assert(#rec.changes > 0 and rec.plan.total_bytes <= fit.HEADROOM * 70 * MiB - fit.SEGMENT_SLACK)
    assert(rec.considered > rec.fitting and rec.fitting > 1)
    -- no configuration that fits is predicted more than 2 % faster
    for _, over in ipairs({ { checkpoint = "auto" }, { ["batch.size"] = 16, ["batch.accumulate"] = 2 },
        { ["batch.size"] = 8, ["batch.accumulate"] = 4 }, { precision = "bf16", checkpoint = "auto" } }) do
      local t, p = seconds(over)
      if p.total_bytes <= fit.HEADROOM * 70 * MiB - fit.SEGMENT_SLACK then
        assert(t >= 0.98 * rec.seconds, ("%.3f < %.3f"):format(t, rec.seconds))
      end
    end
  end },
  { "mnrl_keeps_its_batch_whole_and_turns_on_the_cached_loss", function()
    local r = { ["model.task"] = "embedding", ["loss.name"] = "mnrl", ["batch.size"] = "auto", ["batch.effective"] = 32,
                data = { columns = { "a", "b" } } }
    local rec = choose(r, 70 * MiB)
    assert(rec.recipe.batch.size == 32 and rec.recipe.batch.accumulate == 1)
    assert(rec.recipe.loss.cached == true)
    assert(rec.reasons[1]:find("in-batch negatives", 1, true), rec.reasons[1])
    -- memory.fit never splits it either
    r["memory.fit"] = true
    rec = choose(r, 70 * MiB)
    assert(rec.recipe.batch.size == 32, "split an in-batch loss")
  end },
  { "nothing_fits_out_of_memory_naming_the_key_and_the_fix", function()
    local msg = raises_oom(function() choose({ ["memory.fit"] = true, ["batch.size"] = "auto" }, 30 * MiB) end)
    assert(msg:find('batch.size = "auto" and memory.fit = true: nothing fits the budget of 30.00 MiB', 1, true), msg)
    assert(msg:find("Raise memory.limit", 1, true), msg)
    assert(not msg:find("\n", 1, true), "one paragraph")
  end },
  { "the_keys_auto_effective_and_fit_check", function()
    local keys = require("trainer.recipe.keys")
    keys.value("batch.size", "auto")
    keys.value("memory.fit", true)
    local ok, e = pcall(keys.resolve, "batch", { size = 8, accumulate = 2, effective = 20 })
    assert(not ok and e.msg:find("batch.effective: 20 is not batch.size x batch.accumulate", 1, true), e.msg)
    ok = pcall(keys.resolve, "batch", { size = 8, accumulate = 2, effective = 16 })
    assert(ok)
    ok, e = pcall(keys.resolve, "batch", { size = 0 })
    assert(not ok and e.msg:find("expected a positive integer, got 0", 1, true), e.msg)
  end },
  { "resume_keeps_the_stored_choice", function()
    local r = recipe({ ["batch.size"] = "auto", ["memory.fit"] = true })
    local stored = recipe({ ["batch.size"] = 4, ["batch.accumulate"] = 8, checkpoint = "auto", ["batch.effective"] = 32 })
    assert(fit.keep_stored(r, stored))
    assert(r.batch.size == 4 and r.batch.accumulate == 8 and r.checkpoint == "auto" and r.batch.effective == 32)
    -- a key set on the resume's command line wins
    local r2 = recipe({ ["batch.size"] = "auto" })
    fit.keep_stored(r2, stored, { checkpoint = true })
    assert(r2.checkpoint == nil and r2.batch.size == 4)
  end },
}
