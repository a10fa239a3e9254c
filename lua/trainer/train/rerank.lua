-- trainer.train.rerank: a cross-encoder (a one-logit sequence classifier) scoring and ranking
-- documents for queries, and the reranking evaluator.
--
--   local rerank = require("trainer.train.rerank")
--   local s = rerank.scores(model, tok, { { q, d }, ... } [, opts])  -- sigmoid(logit) per pair
--   local r = rerank.rank(scores)          -- { { corpus_id = 0-based, score = }, ... } best first
--   local m = rerank.evaluate(score_fn, samples [, opts])
--       sentence-transformers' CrossEncoderRerankingEvaluator: samples are
--       { query =, positive = text or list, documents = list } (a retriever's candidates, in its
--       order) or { query =, positive =, negative = list }; score_fn(pairs) -> one number a
--       pair. Returns { map =, ["mrr@K"] =, ["ndcg@K"] =, n = } (K = opts.at_k, default 10), and
--       base_map / base_mrr@K / base_ndcg@K (the candidates' given order) when samples have
--       documents. As there, the positives are always among the candidates reranked
--       (opts.always_rerank_positives, default true), and a query none of whose positives is
--       a candidate scores 0.
-- opts.batch_size (default 32): pairs per forward; opts.device, opts.max_length.
local errors = require("trainer.core.errors")
local tokenizer = require("trainer.core.tokenizer")
local sigmoid = require("trainer.losses.bce").sigmoid

local M = {}

-- The logits of the pairs (a Lua array), batch by batch.
function M.logits(model, tok, pairs, opts)
  opts = opts or {}
  local bs, out = opts.batch_size or 32, {}
  for first = 1, #pairs, bs do
    local chunk = {}
    for i = first, math.min(first + bs - 1, #pairs) do chunk[#chunk + 1] = pairs[i] end
    local b = tok:batch(chunk, { max_length = opts.max_length or model.max_length, truncation = true,
      device = opts.device })
    local logits = model:forward(b)
    tokenizer.free_batch(b)
    local K = logits:shape()[2]
    if K ~= 1 then
      logits:free()
      errors.user("rerank: the model gives %d logits per pair; a cross-encoder (reranker) gives one (a folder with "
        .. "num_labels 1, as model.task = \"cross_encoder\" trains)", K)
    end
    for _, v in ipairs(logits:values()) do out[#out + 1] = v end
    logits:free()
  end
  return out
end

-- CrossEncoder.predict's scores: the sigmoid of each pair's logit.
function M.scores(model, tok, pairs, opts)
  local out = M.logits(model, tok, pairs, opts)
  for i, v in ipairs(out) do out[i] = sigmoid(v) end
  return out
end

-- Indices (0-based) best first; ties keep the earlier index first (CrossEncoder.rank's
-- stable sort).
function M.rank(scores)
  local out = {}
  for i, s in ipairs(scores) do out[i] = { corpus_id = i - 1, score = s } end
  table.sort(out, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    return a.corpus_id < b.corpus_id
  end)
  return out
end

-- ---------------------------------------------------------------- folders
-- A cross-encoder's folder is a transformers *ForSequenceClassification one (sentence-
-- transformers' CrossEncoder loads it): an embedding model's sentence-transformers files
-- would make it a pooling model, so they stay out.
M.EMBEDDING_FILES = { ["modules.json"] = true, ["sentence_bert_config.json"] = true,
  ["config_sentence_transformers.json"] = true, ["1_Pooling/config.json"] = true }

-- config.json's text for a cross-encoder from the config table raw (its source's): the
-- one-label head's architecture and label (labels[0], default LABEL_0), and the sigmoid
-- CrossEncoder.predict applies (sentence_transformers.activation_fn, as CrossEncoder.save
-- writes it).
function M.cross_encoder_config(raw, labels)
  local out = {}
  for k, v in pairs(raw) do out[k] = v end
  local arch = type(out.architectures) == "table" and out.architectures[1]
  if type(arch) ~= "string" or not arch:match("ForSequenceClassification$") then
    local registry = require("trainer.models.registry")
    local model_type = out.model_type or registry.default
    arch = registry.family(model_type, "config.json").classifier_class[model_type]
  end
  local label = labels and labels[0] or "LABEL_0"
  out.architectures, out.num_labels = { arch }, nil
  out.id2label, out.label2id = { ["0"] = label }, { [label] = 0 }
  out.sentence_transformers = { activation_fn = "torch.nn.modules.activation.Sigmoid" }
  return require("trainer.core.json").encode(out, 2) .. "\n"
end

-- ---------------------------------------------------------------- the evaluator's metrics
-- Positions (1-based) best first as numpy's argsort(scores)[::-1]: ties put the later index
-- first.
local function ranking(scores)
  local idx = {}
  for i = 1, #scores do idx[i] = i end
  table.sort(idx, function(a, b)
    if scores[a] ~= scores[b] then return scores[a] > scores[b] end
    return a > b
  end)
  return idx
end

-- sklearn's dcg_score(y_true, y_score, k) with ignore_ties = False: the gains of tied scores
-- averaged over the positions they share; discount 1 / log2(position + 1) up to k.
local function dcg(rel, scores, k)
  local order = ranking(scores)
  local total, pos = 0, 1
  local i = 1
  while i <= #order do
    local j, gain = i, 0
    while j <= #order and scores[order[j]] == scores[order[i]] do gain = gain + rel[order[j]]; j = j + 1 end
    local disc = 0
    for p = pos, pos + (j - i) - 1 do if p <= k then disc = disc + 1 / (math.log(p + 1) / math.log(2)) end end
    total = total + gain / (j - i) * disc
    pos = pos + (j - i)
    i = j
  end
  return total
end

-- sklearn's average_precision_score: over the distinct scores, best first, the precision at
-- each threshold times the recall it adds.
local function average_precision(rel, scores)
  local order = ranking(scores)
  local npos = 0
  for _, r in ipairs(rel) do npos = npos + r end
  local ap, tp, seen, prev_recall = 0, 0, 0, 0
  local i = 1
  while i <= #order do
    local j = i
    while j <= #order and scores[order[j]] == scores[order[i]] do
      tp, seen, j = tp + rel[order[j]], seen + 1, j + 1
    end
    local recall = tp / npos
    ap = ap + (recall - prev_recall) * (tp / seen)
    prev_recall = recall
    i = j
  end
  return ap
end

-- MRR@k, NDCG@k and AP of one query's candidates (CrossEncoderRerankingEvaluator.compute_metrics).
local function query_metrics(rel, scores, num_positives, k)
  local retrieved = 0
  for _, r in ipairs(rel) do retrieved = retrieved + r end
  if retrieved == 0 then return 0, 0, 0 end
  num_positives = math.max(num_positives or 0, retrieved)
  local mrr = 0
  for rank, i in ipairs(ranking(scores)) do
    if rank > k then break end
    if rel[i] ~= 0 then mrr = 1 / rank break end
  end
  local d = #rel > 1 and dcg(rel, scores, k) or rel[1]
  local ideal = 0
  for i = 1, math.min(num_positives, k) do ideal = ideal + 1 / (math.log(i + 1) / math.log(2)) end
  return mrr, d / ideal, average_precision(rel, scores) * (retrieved / num_positives)
end

local function text_list(v, what, i)
  if type(v) == "string" then return { v } end
  if type(v) ~= "table" then errors.user("evaluate.rerank: sample %d: %s must be a text or a list of texts", i, what) end
  for j, t in ipairs(v) do
    if type(t) ~= "string" then errors.user("evaluate.rerank: sample %d: %s[%d] is %s, not a text", i, what, j, type(t)) end
  end
  return v
end

-- Reranking samples of labelled pairs (query, document, label), as a recipe's eval file gives
-- them: the rows of one query, in file order, are its candidate documents; those whose label
-- is at least `threshold` its positives.
function M.samples_of_rows(rows, threshold)
  local samples, of = {}, {}
  for i, r in ipairs(rows) do
    local q, d, y = r[1], r[2], r[#r]
    if type(q) ~= "string" or type(d) ~= "string" or type(y) ~= "number" then
      errors.user("evaluate.rerank: eval row %d must be a query, a document and a label (data.eval_columns)", i)
    end
    local s = of[q]
    if not s then
      s = { query = q, positive = {}, documents = {} }
      of[q], samples[#samples + 1] = s, s
    end
    s.documents[#s.documents + 1] = d
    if y >= threshold then s.positive[#s.positive + 1] = d end
  end
  return samples
end

function M.evaluate(score_fn, samples, opts)
  opts = opts or {}
  local k = opts.at_k or 10
  local rerank_positives = opts.always_rerank_positives ~= false
  if type(samples) ~= "table" or #samples == 0 then errors.user("evaluate.rerank: needs at least one sample") end
  local pairs, metas, base = {}, {}, { map = {}, mrr = {}, ndcg = {} }
  for i, s in ipairs(samples) do
    if type(s) ~= "table" or type(s.query) ~= "string" or s.positive == nil then
      errors.user("evaluate.rerank: sample %d needs a query (a text) and its positive(s)", i)
    end
    if (s.negative == nil) == (s.documents == nil) then
      errors.user("evaluate.rerank: sample %d needs exactly one of documents (the candidates to rerank) and negative", i)
    end
    local positive = text_list(s.positive, "positive", i)
    local is_pos = {}
    for _, p in ipairs(positive) do is_pos[p] = true end
    local docs, rel = {}, {}
    if s.documents ~= nil then
      local documents = text_list(s.documents, "documents", i)
      local base_rel, base_scores = {}, {}
      for j, d in ipairs(documents) do base_rel[j], base_scores[j] = is_pos[d] and 1 or 0, #documents - j + 1 end
      local m, n, a = query_metrics(base_rel, base_scores, #positive, k)
      base.mrr[#base.mrr + 1], base.ndcg[#base.ndcg + 1], base.map[#base.map + 1] = m, n, a
      if rerank_positives then
        for _, p in ipairs(positive) do docs[#docs + 1], rel[#rel + 1] = p, 1 end
        for _, d in ipairs(documents) do if not is_pos[d] then docs[#docs + 1], rel[#rel + 1] = d, 0 end end
      else
        docs, rel = documents, base_rel
      end
    else
      for _, p in ipairs(positive) do docs[#docs + 1], rel[#rel + 1] = p, 1 end
      for _, d in ipairs(text_list(s.negative, "negative", i)) do docs[#docs + 1], rel[#rel + 1] = d, 0 end
    end
    local nrel = 0
    for _, r in ipairs(rel) do nrel = nrel + r end
    if nrel == 0 then
      metas[i] = false
    else
      metas[i] = { rel = rel, first = #pairs + 1, num_positives = #positive }
      for _, d in ipairs(docs) do pairs[#pairs + 1] = { s.query, d } end
    end
  end
  local scores = #pairs > 0 and score_fn(pairs) or {}
  if type(scores) ~= "table" or #scores ~= #pairs then
    errors.user("evaluate.rerank: the score function must return one number per pair (%d), got %s", #pairs,
      type(scores) == "table" and tostring(#scores) or type(scores))
  end
  local sum = { map = 0, mrr = 0, ndcg = 0 }
  for _, m in ipairs(metas) do
    if m then
      local sc = {}
      for j = 1, #m.rel do sc[j] = scores[m.first + j - 1] end
      local mrr, ndcg, ap = query_metrics(m.rel, sc, m.num_positives, k)
      sum.mrr, sum.ndcg, sum.map = sum.mrr + mrr, sum.ndcg + ndcg, sum.map + ap
    end
  end
  local n = #samples
  local out = { map = sum.map / n, ["mrr@" .. k] = sum.mrr / n, ["ndcg@" .. k] = sum.ndcg / n, n = n }
  if #base.map > 0 then
    local function mean(t) local s = 0 for _, v in ipairs(t) do s = s + v end return s / #t end
    out.base_map, out["base_mrr@" .. k], out["base_ndcg@" .. k] = mean(base.map), mean(base.mrr), mean(base.ndcg)
  end
  return out
end

return M
