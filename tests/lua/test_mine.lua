-- Hard-negative mining (trainer.train.mine) against sentence-transformers' mine_hard_negatives
-- (tests/data/mine_golden.json, written by tests/ref/make_mine_golden.py) with tiny_bert:
-- the same rows (anchor, positive, negatives in order) and scores for each option set; the
-- search in small chunks and tiles gives the same; bad options are user errors.
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local native = require("trainer.native")
local mine = require("trainer.train.mine")
local tk = require("trainer.core.tokenizer")

local data = native.root() .. "/tests/data"
local golden = json.read(data .. "/mine_golden.json")

local function embedder()
  local m = trainer.load_model(data .. "/tiny_bert", { on_warning = function() end })
  local tok = tk.load(data .. "/tiny_bert")
  return function(texts)
    local b = tok:batch(texts, { max_length = 64 })
    local out = m:forward(b)
    tk.free_batch(b)
    return out
  end
end

local function pairs_of()
  local p = {}
  for i, r in ipairs(golden.rows) do p[i] = { r.query, r.answer } end
  return p
end

local function opts_of(o, extra)
  local t = { num_negatives = o.num_negatives, range_min = o.range_min, range_max = o.range_max,
              max_score = o.max_score, min_score = o.min_score, margin = o.absolute_margin,
              relative_margin = o.relative_margin, format = o.output_format, corpus = o.corpus and golden.corpus,
              batch_size = 8 }
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

local function same(ours, case, what)
  local theirs = case.rows
  assert(#ours == #theirs, ("%s: %d rows vs sentence-transformers %d"):format(what, #ours, #theirs))
  for i, t in ipairs(theirs) do
    local o = ours[i]
    assert(o[1] == t.query and o[2] == t.answer, ("%s: row %d anchor/positive"):format(what, i))
    if o.negatives then
      for k, n in ipairs(o.negatives) do
        assert(n == t["negative_" .. k], ("%s: row %d negative_%d %q vs %q"):format(what, i, k, n, t["negative_" .. k]))
      end
    else
      assert(o[3] == t.negative, ("%s: row %d negative %q vs %q"):format(what, i, o[3], t.negative))
    end
    assert(#o.scores == #t.scores)
    for k, s in ipairs(t.scores) do
      assert(math.abs(o.scores[k] - s) <= 1e-5, ("%s: row %d score %d %.9g vs %.9g"):format(what, i, k, o.scores[k], s))
    end
  end
end

return {
  { "mined rows equal sentence-transformers' mine_hard_negatives", function()
    local embed = embedder()
    for i, case in ipairs(golden.cases) do
      local rows = mine.run(embed, pairs_of(), opts_of(case.options))
      same(rows, case, ("case %d (%s)"):format(i, json.encode(case.options)))
    end
  end },
  { "small chunks and tiles give the same rows", function()
    local embed = embedder()
    for _, i in ipairs({ 1, 7 }) do
      local case = golden.cases[i]
      same(mine.run(embed, pairs_of(), opts_of(case.options, { corpus_chunk_size = 7, tile = 20 })), case,
        "chunked case " .. i)
    end
  end },
  { "random sampling picks num_negatives of the window, best first, the same for a seed", function()
    local embed = embedder()
    local o = { num_negatives = 2, range_max = 8, sampling = "random", seed = 3, batch_size = 8 }
    local a = mine.run(embed, pairs_of(), o)
    local b = mine.run(embed, pairs_of(), o)
    assert(#a == #b and #a > 0)
    for i = 1, #a do
      assert(a[i][3] == b[i][3])
      if i % 2 == 0 and a[i][1] == a[i - 1][1] and a[i][2] == a[i - 1][2] then
        assert(a[i - 1].scores[2] >= a[i].scores[2])
      end
    end
  end },
  { "bad options are user errors", function()
    local function raises(o, pattern)
      local ok, e = pcall(mine.run, function() error("not reached") end, { { "a", "b" } }, o)
      assert(not ok and errors.is_user_error(e), tostring(e))
      assert(errors.message(e):find(pattern, 1, true), errors.message(e))
    end
    raises({ num_negatives = 0 }, "--num-negatives must be at least 1")
    raises({ range_min = 5, range_max = 5 }, "--range-min must be smaller than --range-max")
    raises({ num_negatives = 4, range_max = 3 }, "cannot mine 4 negatives per anchor")
    raises({ sampling = "best" }, "--sampling must be top or random")
  end },
}
