-- trainer.metrics against scipy.stats (tests/data/loss_golden.json, written by
-- tests/ref/make_loss_golden.py), tie handling, and trainer.evaluate with fake embedding and
-- classification functions.
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local metrics = require("trainer.train.metrics")
local evaluate = require("trainer.train.evaluate")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local native = require("trainer.native")

local golden = json.read(native.root() .. "/tests/data/loss_golden.json").metrics

local function near(a, b, tol, what)
  assert(math.abs(a - b) <= tol, ("%s: %.12g vs %.12g"):format(what or "value", a, b))
end

local function raises(fn, pattern)
  local ok, e = pcall(fn)
  assert(not ok and errors.is_user_error(e), "expected a user error: " .. tostring(e))
  assert(errors.message(e):find(pattern), ("message %q lacks %q"):format(errors.message(e), pattern))
end

-- A fake embedder: each text is "x,y,z" parsed into a row.
local embed = dofile(native.root() .. "/tests/lua/testlib.lua").embed_numbers

return {
  { "scipy_spearman_pearson", function()
    near(metrics.spearman(golden.pred, golden.gold), golden.spearman, 1e-12, "spearman")
    near(metrics.pearson(golden.pred, golden.gold), golden.pearson, 1e-12, "pearson")
  end },
  { "average_ranks_for_ties", function()
    local r = metrics.ranks({ 10, 20, 20, 5, 20 })
    assert(r[4] == 1 and r[1] == 2 and r[2] == 4 and r[3] == 4 and r[5] == 4, table.concat(r, ","))
    near(metrics.spearman({ 1, 2, 3, 4 }, { 10, 20, 30, 40 }), 1, 1e-15, "monotone")
    near(metrics.spearman({ 1, 2, 3, 4 }, { 1, 4, 9, 16 }), 1, 1e-15, "monotone, not linear")
    assert(metrics.pearson({ 1, 2, 3, 4 }, { 1, 4, 9, 16 }) < 0.99)
    near(metrics.pearson({ 1, 2, 3 }, { 3, 2, 1 }), -1, 1e-15, "anti")
    local c = metrics.pearson({ 1, 1, 1 }, { 1, 2, 3 })
    assert(c ~= c, "constant input gives NaN")
    raises(function() metrics.spearman({ 1, 2 }, { 1 }) end, "pair up")
  end },
  { "accuracy", function()
    near(metrics.accuracy({ 0, 1, 2, 2 }, { 0, 1, 1, 2 }), 0.75, 0, "accuracy")
    raises(function() metrics.accuracy({}, {}) end, "at least 1")
  end },
  { "evaluate_sts_with_a_fake_embedder", function()
    collectgarbage()
    local before = memory.stats().allocated
    local pairs = {
      { "1,0,0", "1,0,0" },          -- cos 1
      { "1,0,0", "0,1,0" },          -- cos 0
      { "1,1,0", "1,0,0" },          -- cos 0.7071
      { "1,0,0", "-1,0.2,0" },       -- cos -0.98
      { sentence1 = "0,0,1", sentence2 = "0,1,1" },   -- cos 0.7071
    }
    local scores = { 5, 2, 4, 0, 3 }
    local r = evaluate.sts(embed, pairs, scores, { batch_size = 2 })
    local cos = { 1, 0, math.sqrt(0.5), -1 / math.sqrt(1.04), math.sqrt(0.5) }
    near(r.spearman, metrics.spearman(cos, scores), 1e-6, "spearman")
    near(r.pearson, metrics.pearson(cos, scores), 1e-6, "pearson")
    assert(r.n == 5)
    assert(memory.stats().allocated == before, "evaluate.sts must free the embeddings it was given")
    raises(function() evaluate.sts(function(t) return T.zeros({ #t + 1, 3 }) end, pairs, scores) end, "tensor %[")
    assert(memory.stats().allocated == before, "a wrong-shaped embedding is freed too")
    raises(function() evaluate.sts(embed, pairs, { 1, 2 }) end, "one score per pair")
  end },
  { "evaluate_nli_logits_or_ids", function()
    local pairs = { { "a", "b" }, { "c", "d" }, { "e", "f" }, { "g", "h" } }
    local labels = { 0, 2, 1, 1 }
    local logits_for = { a = { 5, 1, 0 }, c = { 0, 1, 3 }, e = { 0, 2, 1 }, g = { 3, 2, 1 } }
    local r = evaluate.nli(function(batch)
      local rows = {}
      for i, p in ipairs(batch) do rows[i] = logits_for[p[1]] end
      return T.from_table(rows)
    end, pairs, labels, { batch_size = 3 })
    near(r.accuracy, 0.75, 0, "accuracy from logits")
    local r2 = evaluate.nli(function(batch)
      local ids = {}
      for i = 1, #batch do ids[i] = 1 end
      return ids
    end, pairs, labels)
    near(r2.accuracy, 0.5, 0, "accuracy from ids")
  end },
  { "evaluate_custom", function()
    local r = evaluate.custom(function(x) return { score = x * 2 } end, 21)
    assert(r.score == 42)
    raises(function() evaluate.custom(function() return { score = 0 / 0 } end) end, "finite number")
    raises(function() evaluate.custom(function() return 3 end) end, "table of metric name")
  end },
}
