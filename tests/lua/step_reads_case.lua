-- tests/lua/step_reads_case.lua — the fixture of test_step_reads.lua and of the script that
-- wrote its golden file (tests/ref/make_step_reads_golden.lua): a tiny random BERT trained
-- for 12 steps with MNRL, AdamW, grad_clip 1.0 and dropout on 40 fixed sentence pairs;
-- run(log_every, opts) returns metrics.jsonl's objects without the clock's fields
-- (tokens_per_s). opts go to trainer.train.loop.train (lazy_scalars), but opts.precision
-- (default fp32), which goes to the recipe. Not a test: run.lua
-- loads only test_*.lua.
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local outputs = require("trainer.train.outputs")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")

local M = {}
local fx
local runs = 0

function M.fixture()
  if fx then return fx end
  fx = lib.tiny_pairs({ model_seed = 5, text_seed = 23, max_extra = 5, rows = 40, score_format = "%.1f",
                        score = function(rnd) return rnd(50) / 10 end })
  return fx
end

M.CLOCK_FIELDS = { tokens_per_s = true }

function M.run(log_every, opts)
  local d = M.fixture()
  local precision = opts and opts.precision or "fp32"
  runs = runs + 1   -- each run its own out folder
  local out = ("%s/run%d_log%d_%s_%s"):format(d, runs, log_every, opts and opts.lazy_scalars and "lazy" or "plain",
    precision)
  local path = out .. ".lua"
  lib.write(path, ([[
return {
  model = { from = %q },
  data = { train = %q, columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl", scale = 20 }, optim = { lr = 1e-3 }, batch = { size = 8 }, steps = 12,
  grad_clip = 1.0, log = { every = %d, quiet = true }, device = "cpu", out = %q, seed = 7, precision = %q,
}
]]):format(d .. "/tiny", d .. "/train.jsonl", log_every, out, precision))
  -- the allocator's cache is the process's: start from an empty one, as the golden run did
  require("trainer.core.memory").empty_cache()
  local o = { quiet = true }
  for k, v in pairs(opts or {}) do if k ~= "precision" then o[k] = v end end
  assert(loop.train(recipe.load(path), o) == 0)
  local rows = {}
  for i, m in ipairs(outputs.read_metrics(out)) do
    for k in pairs(M.CLOCK_FIELDS) do m[k] = nil end
    rows[i] = m
  end
  return rows
end

return M
