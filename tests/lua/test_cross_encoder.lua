-- Cross-encoders (rerankers) against sentence-transformers on a tiny random BERT cross-encoder
-- it saved (tests/ref/make_tiny_reranker.py: tests/data/tiny_reranker,
-- golden_tiny_reranker.json): the logits and CrossEncoder.predict's sigmoid scores (within
-- 1e-5); BinaryCrossEntropyLoss (also with pos_weight) and the listwise cross_entropy (MultipleNegativesRankingLoss
-- over each query's positive and hard negatives) through trainer.train.step: the loss within
-- 1e-5 relative, gradients of the classifier and of encoder weights within 1e-5 relative (1e-6 absolute).
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local models = require("trainer.models")
local losses = require("trainer.losses")
local tokenizer = require("trainer.core.tokenizer")
local step = require("trainer.train.step")
local rerank = require("trainer.train.rerank")
local native = require("trainer.native")

local root = native.root()
local dir = root .. "/tests/data/tiny_reranker"
local lib = dofile(root .. "/tests/lua/testlib.lua")
local golden = json.read(root .. "/tests/data/golden_tiny_reranker.json")

local function load()
  local model = models.load_model(dir, { on_warning = function(w) error("unexpected warning: " .. w) end })
  return model, tokenizer.load(dir)
end

local function check_grads(model, want, what)
  local got = lib.grads_of(model)
  for name, ref in pairs(want) do
    assert(got[name], what .. ": no gradient for " .. name)
    local rel, abs = lib.rel_err(got[name], ref)
    -- the listwise loss's classifier.bias gradient is zero in exact arithmetic (a softmax
    -- ignores a constant added to every score): only rounding there, checked absolutely
    if abs <= 1e-6 then rel = 0 end
    assert(rel <= 1e-5, ("%s: %s gradient relative error %.3g > 1e-5"):format(what, name, rel))
  end
end

local function check_loss(v, want, what)
  assert(math.abs(v - want) <= 1e-5 * math.abs(want), ("%s: loss %.9g vs %.9g"):format(what, v, want))
end

return {
  { "scores_match_crossencoder_predict", function()
    local model, tok = load()
    assert(model.task == "classification" and model.num_labels == 1, "a one-label sequence classifier")
    local b = tok:batch(golden.pairs, { max_length = model.max_length })
    local logits = model:forward(b)
    tokenizer.free_batch(b)
    assert(logits:shape()[1] == #golden.pairs and logits:shape()[2] == 1, "logits [B, 1]")
    local v = logits:values()
    logits:free()
    local sigmoid = require("trainer.losses.bce").sigmoid
    for i = 1, #golden.pairs do
      assert(math.abs(v[i] - golden.logits[i]) <= 1e-5, ("logit %d: %.9g vs %.9g"):format(i, v[i], golden.logits[i]))
      local s = sigmoid(v[i])
      assert(math.abs(s - golden.scores[i]) <= 1e-5, ("score %d: %.9g vs %.9g"):format(i, s, golden.scores[i]))
    end
    tok:free(); model:free()
  end },

  { "bce_matches_binary_cross_entropy_loss", function()
    local model, tok = load()
    model:eval():set_grad_enabled(true)
    local rows = {}
    for i, p in ipairs(golden.pairs) do rows[i] = { p[1], p[2], golden.bce.labels[i] } end
    local loss = losses.new({ name = "bce" })
    local v = step.micro { model = model, loss = loss, tokenizer = tok, batch = rows, max_length = 64 }
    check_loss(v, golden.bce.loss, "bce")
    check_grads(model, golden.bce.grads, "bce")
    -- pos_weight (BCEWithLogitsLoss' pos_weight 3)
    lib.clear_grads(model)
    v = step.micro { model = model, loss = losses.new({ name = "bce", pos_weight = 3 }), tokenizer = tok, batch = rows,
      max_length = 64 }
    check_loss(v, golden.bce_pos_weight.loss, "bce pos_weight 3")
    check_grads(model, golden.bce_pos_weight.grads, "bce pos_weight 3")
    -- score_scale divides the gold scores: 0-5 scores give the same loss
    lib.clear_grads(model)
    for _, r in ipairs(rows) do r[3] = r[3] * 5 end
    v = step.micro { model = model, loss = losses.new({ name = "bce", score_scale = 5 }), tokenizer = tok, batch = rows,
      max_length = 64 }
    check_loss(v, golden.bce.loss, "bce score_scale 5")
    -- a label outside [0, 1] names the row
    local ok, err = pcall(step.micro, { model = model, loss = losses.new({ name = "bce" }), tokenizer = tok, batch = rows,
      max_length = 64 })
    assert(not ok and tostring(require("trainer.core.errors").message(err)):find("not in %[0, 1%]"), tostring(err))
    lib.clear_grads(model)
    tok:free(); model:free()
  end },

  { "listwise_cross_entropy_matches_mnrl_hard_negatives", function()
    local model, tok = load()
    model:eval():set_grad_enabled(true)
    local lw = golden.listwise
    local rows = {}
    for i, q in ipairs(lw.queries) do
      rows[i] = { q, lw.positives[i] }
      for _, n in ipairs(lw.negatives[i]) do rows[i][#rows[i] + 1] = n end
    end
    local loss = losses.new({ name = "cross_entropy" }, { cross_encoder = true })
    assert(loss.listwise, "cross_entropy of a cross-encoder is the listwise loss")
    local v = step.micro { model = model, loss = loss, tokenizer = tok, batch = rows, max_length = 64 }
    check_loss(v, lw.loss, "listwise")
    check_grads(model, lw.grads, "listwise")
    lib.clear_grads(model)
    -- a row without a negative is an error that says what the rows need
    local ok, err = pcall(step.micro, { model = model, loss = loss, tokenizer = tok, max_length = 64,
      batch = { { "q", "p" }, { "q2", "p2" } } })
    assert(not ok and tostring(require("trainer.core.errors").message(err)):find("at least one negative"), tostring(err))
    tok:free(); model:free()
  end },

  { "bce_needs_one_logit", function()
    local loss = losses.new({ name = "bce" })
    local logits = T.from_table({ { 1, 2 }, { 3, 4 } })
    local ok, err = pcall(loss.forward, loss, { logits }, { 1, 0 })
    logits:free()
    assert(not ok and tostring(require("trainer.core.errors").message(err)):find("a cross%-encoder gives one"), tostring(err))
  end },

  { "rank_matches_crossencoder_rank", function()
    local model, tok = load()
    local g = golden.rank
    local pairs = {}
    for i, d in ipairs(g.documents) do pairs[i] = { g.query, d } end
    local r = rerank.rank(rerank.scores(model, tok, pairs, { batch_size = 2 }))
    for i, want in ipairs(g.ranking) do
      assert(r[i].corpus_id == want.corpus_id, ("rank %d: document %d vs %d"):format(i, r[i].corpus_id, want.corpus_id))
      assert(math.abs(r[i].score - want.score) <= 1e-5, ("rank %d: score %.9g vs %.9g"):format(i, r[i].score, want.score))
    end
    tok:free(); model:free()
  end },

  { "reranking_evaluator_matches", function()
    local model, tok = load()
    local got = rerank.evaluate(function(pairs) return rerank.scores(model, tok, pairs) end, golden.rerank.samples)
    for name, want in pairs(golden.rerank.metrics) do
      assert(got[name] and math.abs(got[name] - want) <= 1e-9, ("%s: %s vs %.12g"):format(name, tostring(got[name]), want))
    end
    assert(got.n == #golden.rerank.samples, "n")
    tok:free(); model:free()
  end },

  { "reranking_metrics_ties_and_misses", function()
    -- ties: sklearn averages tied gains (dcg) and counts a tied group at once (AP); numpy's
    -- reversed argsort puts the later of tied candidates first (MRR)
    local samples = { { query = "q", positive = { "a", "c" }, negative = { "b", "d" } },
                      { query = "q2", positive = "x", documents = { "y", "z" } } }
    local m = rerank.evaluate(function(p) assert(#p == 7) return { 0.5, 0.5, 0.5, 0.1, 0.9, 0.2, 0.3 } end,
      samples)
    -- sample 1: candidates a, c (relevant), b, d scored 0.5, 0.5, 0.5, 0.1: the three tied
    -- share positions 1-3 (gain 2/3 each); AP: precision 2/3 at recall 1; MRR: the later of
    -- the tie (b, irrelevant) first, then c: 1/2
    local d = (2 / 3) * (1 + 1 / math.log(3, 2) + 0.5)
    local ideal = 1 + 1 / math.log(3, 2)
    assert(math.abs(d / ideal - 0.8710490642551526) <= 1e-12, "compute_metrics' NDCG of sample 1")
    assert(math.abs(m["ndcg@10"] - (d / ideal + 1) / 2) <= 1e-12, "ndcg " .. m["ndcg@10"])
    assert(math.abs(m.map - (2 / 3 + 1) / 2) <= 1e-12, "map " .. m.map)
    assert(math.abs(m["mrr@10"] - (0.5 + 1) / 2) <= 1e-12, "mrr " .. m["mrr@10"])
    -- sample 2: x, the positive, is reranked with the documents y, z (0.9 first): 1 each; its
    -- base (the documents' order) finds no positive: 0, the only sample with documents
    assert(m.base_map == 0 and m["base_mrr@10"] == 0, "base")
  end },
}