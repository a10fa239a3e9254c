-- model.dropout = 0 turns off every dropout site, the attention probabilities' included
-- two seeds then give the same losses (rows in file order, a loss
-- without parameters: the seed reaches only dropout), and batch = { size = 4,
-- accumulate = 2 } gives the losses of size = 8 (CosineSimilarityLoss is a mean over
-- rows, so two half-batches average to the whole batch's loss and gradient).
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local outputs = require("trainer.train.outputs")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")

local tests = {}
local setup, cleanup = lib.tiny_pairs_once({ model_seed = 5, text_seed = 17, max_extra = 5, rows = 48,
  score_format = "%.2f", score = function(rnd) return rnd(100) / 100 end })

-- The per-step losses of a 4-step run with the given overrides.
local function losses(name, overrides)
  local d = setup().dir
  local path = lib.tiny_recipe(d, name, [[
return {
  model = { from = MODEL, dropout = 0 },
  data = { train = TRAIN, columns = { "sentence1", "sentence2", "score" }, shuffle = false },
  loss = { name = "cosine" }, optim = { lr = 1e-2 }, batch = { size = 8 }, steps = 4,
  save = { final = false }, eval = { at_start = false }, log = { quiet = true }, device = "cpu", out = OUT,
}
]])
  local rc = loop.train(recipe.load(path, overrides), { quiet = true })
  assert(rc == 0, "run " .. name .. " exited " .. tostring(rc))
  local t = {}
  for _, m in ipairs(outputs.read_metrics(d .. "/" .. name)) do t[m.step] = m.loss end
  assert(#t == 4, name .. ": expected 4 steps, got " .. #t)
  return t
end

local function same(a, b, tol, what)
  for i = 1, #a do
    assert(math.abs(a[i] - b[i]) <= tol * math.max(1, math.abs(a[i])),
      ("%s: step %d loss %.8f vs %.8f"):format(what, i, a[i], b[i]))
  end
end

tests[#tests + 1] = { "two_seeds_same_losses", function()
  local a = losses("seed1", { "seed=1" })
  local b = losses("seed2", { "seed=2" })
  -- bitwise: with no dropout nothing random is left
  same(a, b, 0, "seed 1 vs seed 2 with model.dropout = 0")
end }

tests[#tests + 1] = { "accumulate_equals_big_batch", function()
  local big = losses("b8", { "batch.size=8" })
  local acc = losses("b4x2", { "batch.size=4", "batch.accumulate=2" })
  same(big, acc, 1e-4, "size 8 vs size 4 x accumulate 2")
end }

tests[#tests + 1] = { "dropout_override_reaches_attention", function()
  local r = recipe.load(setup().dir .. "/seed1.lua", { "model.dropout=0.25" })
  local run = require("trainer.train.run")
  local t = run.build(r, { quiet = true })
  local n = 0
  for _, mod in t.model:named_modules() do
    if mod.__name == "BertAttention" then assert(mod.attn_p == 0.25, "attn_p " .. tostring(mod.attn_p)) n = n + 1 end
  end
  t:free()
  assert(n == 2, "expected 2 attention modules, got " .. n)
end }

return lib.with_cleanup(tests, cleanup)
