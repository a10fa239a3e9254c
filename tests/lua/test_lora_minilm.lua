-- LoRA's memory claim on all-MiniLM-L6-v2: after one AdamW step, the
-- allocator's grads + optimizer bytes (trainer.memory by_tag) with LoRA r 8 on query,value are
-- under 5 % of full fine-tuning's, and the optimizer's own ledger agrees. Frozen weights get
-- no gradient buffer and no optimizer state. Prints "SKIP ..." when models/all-MiniLM-L6-v2 is
-- absent (make fetch-models).
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local optim = require("trainer.train.optim")
local lora = require("trainer.train.lora")
local native = require("trainer.native")

local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local dir = native.root() .. "/models/all-MiniLM-L6-v2"

local function present() return lib.model_present(dir, "test_lora_minilm") end

local function tagged(s) return s.by_tag.grads + s.by_tag.optimizer end

-- One AdamW step on sum(embedding) for a 2 x 6 batch; returns the grads + optimizer bytes
-- the step left allocated (allocator view) and the optimizer's own ledger.
local function one_step(use_lora)
  local m = trainer.load_model(dir, { on_warning = function() end })
  if use_lora then lora.apply(m, { r = 8, alpha = 16, targets = { "query", "value" } }) end
  m:train()
  local before = tagged(memory.stats())
  local opt = optim.new(m, { name = "adamw", lr = 1e-4 })
  local ids = T.from_table({ { 101, 1996, 4937, 2938, 2006, 102 }, { 101, 7592, 2088, 102, 0, 0 } }, { dtype = "i32" })
  local mask = T.from_table({ { 1, 1, 1, 1, 1, 1 }, { 1, 1, 1, 1, 0, 0 } }, { dtype = "i32" })
  opt:zero_grad()
  local e = m:forward({ input_ids = ids, attention_mask = mask })
  local de = T.ones(e:shape())
  m:backward(de)
  de:free(); e:free(); ids:free(); mask:free()
  opt:step()
  local bytes = tagged(memory.stats()) - before
  local ledger = opt:memory()
  for name, p in m:parameters() do
    if not p.trainable then
      assert(p.grad == nil, "frozen " .. name .. " has a grad buffer")
      assert(opt.state_[name] == nil, "frozen " .. name .. " has optimizer state")
    end
  end
  opt:free()
  m:free()
  return bytes, ledger.grads + ledger.optimizer
end

return {
  { "lora_r8_query_value_grads_and_optimizer_under_5_percent_of_full", function()
    if not present() then return end
    local full, full_ledger = one_step(false)
    local lo, lo_ledger = one_step(true)
    assert(full > 0 and full == full_ledger, ("full fine-tuning: allocator %d vs optimizer ledger %d"):format(full, full_ledger))
    assert(lo == lo_ledger, ("LoRA: allocator %d vs optimizer ledger %d"):format(lo, lo_ledger))
    -- 12 adapters of r 8 on 384 x 384: (8*384 + 384*8) * 12 params, f32 grad + 2 AdamW slots
    assert(lo == (8 * 384 * 2) * 12 * 4 * 3, "LoRA grads + optimizer bytes " .. lo)
    local ratio = lo / full
    print(("  all-MiniLM-L6-v2 grads + optimizer: full %.1f MiB, LoRA r 8 query,value %.2f MiB (%.2f %%)"):format(
      full / 2 ^ 20, lo / 2 ^ 20, 100 * ratio))
    assert(ratio < 0.05, ("LoRA grads + optimizer are %.2f %% of full fine-tuning (want < 5 %%)"):format(100 * ratio))
  end },
}
