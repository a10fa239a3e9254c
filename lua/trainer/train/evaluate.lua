-- trainer.train.evaluate: the evaluators of a run. Each returns a table of metric name -> number,
-- the names summary.json's `eval` uses.
--
--   evaluate.sts(embed_fn, pairs, scores [, opts]) -> { spearman =, pearson =, n = }
--       sentence-transformers' EmbeddingSimilarityEvaluator (cosine): the correlations
--       between cos(embed(a_i), embed(b_i)) and the gold scores. pairs: { { a, b }, ... }
--       (or records with sentence1 / sentence2); embed_fn(texts) -> a NEW tensor [#texts, C]
--       (each call runs in a T.scope: what it makes is freed when the batch's cosines are read).
--   evaluate.nli(classify_fn, pairs, labels [, opts]) -> { accuracy =, n = }
--       classify_fn(pairs) -> a NEW logits tensor [#pairs, K] (freed here; the prediction is
--       the argmax) or a Lua array of predicted class ids.
--   evaluate.custom(fn, ...) -> fn(...)'s table, checked to map names to finite numbers
--       (a recipe's own evaluator).
-- opts.batch_size (default 32): texts/pairs per call of embed_fn / classify_fn.
-- Also under the names evaluate_sts and evaluate_nli.
local T = require("trainer.core.tensor")
local metrics = require("trainer.train.metrics")
local errors = require("trainer.core.errors")

local M = {}

local function pair_texts(p, i, what)
  local a, b
  if type(p) == "table" then a, b = p[1] or p.sentence1, p[2] or p.sentence2 end
  if type(a) ~= "string" or type(b) ~= "string" then
    errors.user("evaluate.%s: pair %d must be { text_a, text_b } (or sentence1/sentence2), got %s", what, i, type(p))
  end
  return a, b
end

local function want_tensor(t, rows, what)
  if not T.is_tensor(t) or t:ndim() ~= 2 or t:shape()[1] ~= rows then
    errors.user("evaluate.%s: the function must return a tensor [%d, C] for %d inputs, got %s", what, rows, rows,
      T.is_tensor(t) and ("shape {" .. table.concat(t:shape(), ", ") .. "}") or type(t))
  end
end

-- Row-wise cosines of two [n, C] tensors, in double on the host.
local function row_cosines(e1, e2, out)
  local n, c = e1:shape()[1], e1:shape()[2]
  local v1, v2 = e1:values(), e2:values()
  for i = 0, n - 1 do
    local dot, n1, n2 = 0, 0, 0
    for j = 1, c do
      local a, b = v1[i * c + j], v2[i * c + j]
      dot, n1, n2 = dot + a * b, n1 + a * a, n2 + b * b
    end
    -- torch.nn.functional.normalize's eps: a zero vector has cosine 0
    out[#out + 1] = dot / (math.max(math.sqrt(n1), 1e-12) * math.max(math.sqrt(n2), 1e-12))
  end
end

function M.sts(embed_fn, pairs, scores, opts)
  opts = opts or {}
  local bs = opts.batch_size or 32
  if type(pairs) ~= "table" or type(scores) ~= "table" or #pairs ~= #scores or #pairs < 2 then
    errors.user("evaluate.sts: needs at least 2 pairs and one score per pair (got %s pairs, %s scores)",
      type(pairs) == "table" and #pairs or type(pairs), type(scores) == "table" and #scores or type(scores))
  end
  local cos = {}
  for s = 1, #pairs, bs do
    local ta, tb = {}, {}
    for i = s, math.min(s + bs - 1, #pairs) do ta[#ta + 1], tb[#tb + 1] = pair_texts(pairs[i], i, "sts") end
    T.scope(function()
      local e1 = embed_fn(ta)
      want_tensor(e1, #ta, "sts")
      local e2 = embed_fn(tb)
      want_tensor(e2, #tb, "sts")
      row_cosines(e1, e2, cos)
    end)
  end
  return { spearman = metrics.spearman(cos, scores), pearson = metrics.pearson(cos, scores), n = #pairs }
end

-- The argmax of each row of logits [n, K] (0-based class ids).
local function argmax_rows(logits)
  local n, k = logits:shape()[1], logits:shape()[2]
  local v, out = logits:values(), {}
  for i = 0, n - 1 do
    local best = 0
    for j = 1, k - 1 do if v[i * k + j + 1] > v[i * k + best + 1] then best = j end end
    out[i + 1] = best
  end
  return out
end

function M.nli(classify_fn, pairs, labels, opts)
  opts = opts or {}
  local bs = opts.batch_size or 32
  if type(pairs) ~= "table" or type(labels) ~= "table" or #pairs ~= #labels or #pairs == 0 then
    errors.user("evaluate.nli: needs pairs and one label per pair (got %s pairs, %s labels)",
      type(pairs) == "table" and #pairs or type(pairs), type(labels) == "table" and #labels or type(labels))
  end
  local pred = {}
  for s = 1, #pairs, bs do
    local batch = {}
    for i = s, math.min(s + bs - 1, #pairs) do
      pair_texts(pairs[i], i, "nli")
      batch[#batch + 1] = pairs[i]
    end
    T.scope(function()
      local out = classify_fn(batch)
      if T.is_tensor(out) then
        want_tensor(out, #batch, "nli")
        out = argmax_rows(out)
      elseif type(out) ~= "table" or #out ~= #batch then
        errors.user("evaluate.nli: the classify function must return a logits tensor [%d, K] or %d class ids, got %s",
          #batch, #batch, type(out))
      end
      for _, p in ipairs(out) do pred[#pred + 1] = p end
    end)
  end
  return { accuracy = metrics.accuracy(pred, labels), n = #pairs }
end

function M.custom(fn, ...)
  if type(fn) ~= "function" then errors.user("evaluate.custom: expects a function, got %s", type(fn)) end
  local result = require("trainer.train.user_code").call("eval.fn", fn, ...)
  if type(result) ~= "table" then
    errors.user("a custom evaluator must return a table of metric name -> number, got %s", type(result))
  end
  for k, v in pairs(result) do
    if type(k) ~= "string" or type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
      errors.user("a custom evaluator returned %s = %s; every entry must be a metric name -> finite number",
        tostring(k), tostring(v))
    end
  end
  return result
end

M.evaluate_sts, M.evaluate_nli = M.sts, M.nli

return M
