-- tests/lua/keep_less_case.lua — the fixture of test_keep_less.lua and of the script that
-- wrote its golden file (tests/ref/make_keep_less_golden.lua), so both run the same step:
-- all-MiniLM-L6-v2 with LoRA r 8 (dropout 0.1) on query and value, dropout on, fp32 on the
-- CPU, 8 sentences padded to their longest, loss = sum(embeddings * w) for a fixed w; one
-- forward and backward (lora_B seeded non-zero, so lora_A gets a gradient) with checkpointing of every layer (ckpt = { every = 1 }) or none.
-- Returns { loss, grads = { name -> { sum, abs, first = {8 values} } }, saved, peak }:
-- saved = activation bytes alive after the forward (what the backward will read), peak =
-- the activations' peak over forward + backward. Not a test: run.lua loads only test_*.lua.
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local ops = require("trainer.core.ops")
local lora = require("trainer.train.lora")
local checkpoint = require("trainer.train.grad_checkpoint")
local native = require("trainer.native")

local M = {}

M.dir = native.root() .. "/models/all-MiniLM-L6-v2"

M.texts = {
  "A man is playing a guitar on the stage.", "Two dogs run across a snowy field.",
  "The committee postponed its decision until next week.", "She reads the paper every morning.",
  "A child is eating an ice cream", "Children are playing football in the park after school.",
  "Stock markets fell sharply on Monday.", "The cat sleeps.",
}

function M.present()
  local f = io.open(M.dir .. "/model.safetensors", "rb")
  if f then f:close() return true end
  return false
end

local function digest(g)
  local v = g:values()
  local s, a, first = 0, 0, {}
  for i = 1, #v do s = s + v[i]; a = a + math.abs(v[i]) end
  for i = 1, 8 do first[i] = v[i] end
  return { sum = s, abs = a, first = first }
end

function M.run(ckpt)
  local m = trainer.load_model(M.dir, { on_warning = function() end })
  local tok = require("trainer.core.tokenizer").load(M.dir)
  lora.apply(m, { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" } })
  -- B starts at zero, which would leave every lora_A gradient zero: give it seeded values
  local k = 0
  for name, p in m:parameters() do
    if name:match("lora_B%.weight$") then
      k = k + 1
      local r = T.randn(p.value:shape(), { seed = 5, stream = k, tag = "workspace" })
      ops.axpy_(p.value, r, 0.02)
      r:free()
    end
  end
  if ckpt then checkpoint.apply(m, ckpt) end
  m:train()
  m.rng.seed, m.rng.step = 42, 3
  local enc = tok:batch(M.texts, { max_length = 48, truncation = true, padding = "longest" })
  memory.reset_peak()
  local before = memory.stats().by_tag.activations
  local e = m:forward(enc)
  local saved = memory.stats().by_tag.activations - before - e:nbytes()
  local w = T.randn(e:shape(), { seed = 9, stream = 1, tag = "workspace" })
  local prod = ops.mul(e, w)
  local loss = 0
  for _, x in ipairs(prod:values()) do loss = loss + x end
  prod:free()
  m:backward(w)
  local peak = memory.stats().peak_by_tag.activations - before
  local grads = {}
  for name, p in m:parameters() do
    if p.trainable then grads[name] = digest(p.grad) end
  end
  w:free(); e:free()
  for _, t in pairs(enc) do t:free() end
  tok:free(); m:free()
  return { loss = loss, grads = grads, saved = saved, peak = peak }
end

return M
