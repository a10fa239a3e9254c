-- Mixed precision and accumulation on all-MiniLM-L6-v2, through the training step
-- the loop uses (trainer.step.micro: tokenize, one forward for both text columns, cosine
-- loss, backward scaled by ctx.scale): bf16 cuts peak activations, and 2 x 4 accumulation
-- gives the losses of one batch of 8 over AdamW steps (dropout off). Run on a tiny
-- sentence-embedding folder always and on all-MiniLM-L6-v2 when models/ has it
-- (make fetch-models), with short texts and few steps.
local memory = require("trainer.core.memory")
local models = require("trainer.models")
local losses = require("trainer.losses")
local optim = require("trainer.train.optim")
local tokenizer = require("trainer.core.tokenizer")
local step = require("trainer.train.step")
local amp = require("trainer.train.amp")
local native = require("trainer.native")

local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

-- n rows { text, text, score in [0, 1] }, deterministic, 3..8 words per text.
local function rows_of(n) return lib.rows_of(n, 2, function(i) return ((i * 37) % 11) / 10 end) end

local tiny_dir
local function folders()
  if not tiny_dir then
    tiny_dir = os.tmpname()
    os.remove(tiny_dir)
    models.tiny_folder(tiny_dir, { seed = 5 })
  end
  local list = { tiny_dir }
  local minilm = native.root() .. "/models/all-MiniLM-L6-v2"
  local f = io.open(minilm .. "/config.json")
  if f then f:close(); list[2] = minilm
  else print("    (all-MiniLM-L6-v2 absent: make fetch-models; the tiny folder only)") end
  return list
end

local function load(dir, precision)
  local m = models.load_model(dir, { on_warning = function() end })
  m:eval():set_grad_enabled(true)   -- dropout off, gradients on
  amp.prepare(m, precision)
  return m
end

-- steps AdamW steps of `accumulate` micro-batches over rows; per-step mean losses.
local function losses_of(dir, rows, steps, accumulate)
  local m = load(dir, "fp32")
  local tok = tokenizer.load(dir)
  local loss = losses.new({ name = "cosine" })
  local opt = optim.new(m, { name = "adamw", lr = 1e-4 })
  local per = math.floor(#rows / accumulate)
  local out = {}
  for s = 1, steps do
    opt:zero_grad()
    local sum = 0
    for k = 0, accumulate - 1 do
      local mb = {}
      for i = 1, per do mb[i] = rows[k * per + i] end
      local v = step.micro({ model = m, loss = loss, tokenizer = tok, batch = mb, max_length = 16, scale = 1 / accumulate,
        ntexts = 2 })
      sum = sum + v / accumulate
    end
    opt:step()
    out[s] = sum
  end
  opt:free(); loss:free(); m:free()
  return out
end

return {
  { "bf16_cuts_peak_activations_in_a_training_step", function()
    local rows = rows_of(16)
    for _, dir in ipairs(folders()) do
      local peaks = {}
      for _, precision in ipairs({ "fp32", "bf16" }) do
        local m = load(dir, precision)
        local tok = tokenizer.load(dir)
        local loss = losses.new({ name = "cosine" })
        local a0 = memory.stats().by_tag.activations
        memory.reset_peak()
        step.micro({ model = m, loss = loss, tokenizer = tok, batch = rows, max_length = 16, ntexts = 2 })
        peaks[precision] = memory.stats().peak_by_tag.activations - a0
        assert(memory.stats().by_tag.activations == a0, precision .. ": activations left after the step")
        loss:free(); m:free()
      end
      print(("    %s: peak activations fp32 %d B, bf16 %d B (%.2f)"):format(dir:match("[^/]+$"), peaks.fp32, peaks.bf16,
        peaks.bf16 / peaks.fp32))
      -- not half: in f32 a layer remakes its two block outputs from its norms' kept sums, which a
      -- bf16 layer keeps (a bf16 sum is rounded after the output was made), and the f32
      -- statistics stay f32
      assert(peaks.bf16 < 0.75 * peaks.fp32, ("%s: fp32 %d, bf16 %d"):format(dir, peaks.fp32, peaks.bf16))
    end
  end },

  { "accumulate_2x4_gives_the_losses_of_one_batch_of_8", function()
    local rows = rows_of(8)
    for _, dir in ipairs(folders()) do
      local one = losses_of(dir, rows, 3, 1)
      local acc = losses_of(dir, rows, 3, 2)
      assert(one[3] ~= one[1], "the steps changed the model")
      for s = 1, 3 do
        assert(math.abs(acc[s] - one[s]) <= 1e-5 * math.abs(one[s]),
          ("%s step %d: 2x4 %.9g, 1x8 %.9g"):format(dir, s, acc[s], one[s]))
      end
    end
  end },
}
