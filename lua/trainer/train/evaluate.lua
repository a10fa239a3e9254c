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
--   evaluate.ir(embed_fn, queries, corpus, relevant [, opts]) -> { cosine_ndcg@10 =, ... }
--       sentence-transformers' InformationRetrievalEvaluator: queries and corpus are lists of
--       { id =, text = }, relevant maps a query id to a set { [corpus id] = true }; queries
--       with no relevant document are left out, as ST does. For each similarity (opts.
--       similarity_fn_names, default { "cosine" }; "dot" too) every query's top max(k)
--       documents are ranked by (-score, corpus id), and accuracy@k, precision@k, recall@k
--       (k in 1, 3, 5, 10), mrr@10, ndcg@10 and map@100 are ST's definitions, named as ST names
--       them (cosine_ndcg@10). The search is exact and bounded: the queries are embedded
--       once, the corpus in chunks of opts.corpus_chunk_size documents (default 50000), each
--       chunk scored against blocks of queries by one matrix product whose [queries, chunk]
--       tile has at most opts.tile (default 2^22) scores, and a running top-k per query (a
--       heap) keeps the best; no queries x corpus matrix is ever made. opts.accuracy_at_k,
--       precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k replace ST's k lists;
--       opts.query_prompt / corpus_prompt are put before every query / document text.
--   evaluate.triplet(embed_fn, triplets [, opts]) -> { cosine_accuracy = }
--       sentence-transformers' TripletEvaluator: the fraction of (anchor, positive, negative)
--       with sim(a, p) > sim(a, n) + opts.margin (default 0).
--   evaluate.binary(embed_fn, pairs, labels [, opts]) -> { cosine_accuracy =, cosine_f1 =, ... }
--       sentence-transformers' BinaryClassificationEvaluator: labels 0/1; accuracy, f1,
--       precision, recall at the best threshold (and those thresholds), average precision
--       (scikit-learn's) and Matthews' correlation at the F1 threshold.
--   With several similarity_fn_names, triplet and binary add max_<metric> as ST does.
-- opts.batch_size (default 32): texts/pairs per call of embed_fn / classify_fn.
-- Also under the names evaluate_sts and evaluate_nli.
local T = require("trainer.core.tensor")
local metrics = require("trainer.train.metrics")
local errors = require("trainer.core.errors")
local ffi = require("ffi")

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

-- fn(dot, |a|^2, |b|^2) of each pair of rows a, b of two [n, c] matrices given as flat value
-- lists (row after row), summed in double in column order.
function M.row_products(v1, v2, n, c, fn)
  for i = 0, n - 1 do
    local dot, n1, n2 = 0, 0, 0
    for j = 1, c do
      local a, b = v1[i * c + j], v2[i * c + j]
      dot, n1, n2 = dot + a * b, n1 + a * a, n2 + b * b
    end
    fn(dot, n1, n2)
  end
end

-- row_products of two [n, C] tensors, read to the host.
local function each_row_products(e1, e2, fn)
  M.row_products(e1:values(), e2:values(), e1:shape()[1], e1:shape()[2], fn)
end

-- The cosine of each_row_products' terms, with torch.nn.functional.normalize's eps: a zero
-- vector has cosine 0.
local function cosine_of(dot, n1, n2)
  return dot / (math.max(math.sqrt(n1), 1e-12) * math.max(math.sqrt(n2), 1e-12))
end

-- Row-wise cosines of two [n, C] tensors, in double on the host.
local function row_cosines(e1, e2, out)
  each_row_products(e1, e2, function(dot, n1, n2) out[#out + 1] = cosine_of(dot, n1, n2) end)
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

-- ---------------------------------------------------------------- similarity functions
local SIMILARITIES = { cosine = true, dot = true }

local function similarity_names(opts, what)
  local names = opts.similarity_fn_names or { "cosine" }
  if type(names) ~= "table" or #names == 0 then
    errors.user("evaluate.%s: similarity_fn_names must be a list such as { \"cosine\", \"dot\" }", what)
  end
  local out, seen = {}, {}
  for _, n in ipairs(names) do
    if not SIMILARITIES[n] then
      errors.user("evaluate.%s: similarity %q is not one of cosine, dot", what, tostring(n))
    end
    if not seen[n] then seen[n] = true out[#out + 1] = n end
  end
  table.sort(out)   -- ST reports the score functions in name order
  return out
end

-- x rounded to float32 (scores are float32 in sentence-transformers: ties, thresholds and
-- midpoints are those of float32 numbers).
local f32box = ffi.new("float[1]")
local function f32(x) f32box[0] = x return tonumber(f32box[0]) end

-- The next float32 above x (numpy.nextafter(x, inf) in float32).
local function next_f32(x)
  local u = ffi.new("union { float f; uint32_t u; }")
  u.f = x
  if x ~= x or x == math.huge then return x end
  if u.f == 0 then u.u = 1 return tonumber(u.f) end
  if u.f > 0 then u.u = u.u + 1 else u.u = u.u - 1 end
  return tonumber(u.f)
end

-- Row-wise similarity of two [n, C] tensors, appended to out[name] for each name: computed
-- in double, stored as float32.
local function row_similarities(e1, e2, names, out)
  each_row_products(e1, e2, function(dot, n1, n2)
    for _, name in ipairs(names) do
      local o = out[name]
      o[#o + 1] = f32(name == "dot" and dot or cosine_of(dot, n1, n2))
    end
  end)
end

-- ---------------------------------------------------------------- information retrieval
local IR_DEFAULTS = {
  mrr_at_k = { 10 }, ndcg_at_k = { 10 }, accuracy_at_k = { 1, 3, 5, 10 },
  precision_recall_at_k = { 1, 3, 5, 10 }, map_at_k = { 100 },
}
M.ir_defaults = IR_DEFAULTS
M.IR_CHUNK = 50000   -- documents embedded and searched at once (ST's corpus_chunk_size)
M.IR_TILE = 2 ^ 22   -- scores in one [queries, chunk] block (16 MiB of f32)

-- A bounded "best k" set of (score, document index) under ST's order: a higher score first,
-- a tie to the smaller corpus id. A binary heap with the WORST kept entry at its root, so a
-- candidate is compared with the root alone unless it gets in.
local function better(s1, id1, s2, id2)
  if s1 ~= s2 then return s1 > s2 end
  return id1 < id2
end

local function heap_push(h, k, score, di, ids)
  local hs, hd = h.s, h.d
  local n = h.n
  if n < k then
    n = n + 1
    h.n = n
    local i = n
    -- sift up: the parent must be worse than (or equal to) the child
    while i > 1 do
      local p = math.floor(i / 2)
      if better(hs[p], ids[hd[p]], score, ids[di]) then
        hs[i], hd[i] = hs[p], hd[p]
        i = p
      else break end
    end
    hs[i], hd[i] = score, di
    return
  end
  if not better(score, ids[di], hs[1], ids[hd[1]]) then return end
  local i = 1
  while true do
    local l = 2 * i
    if l > n then break end
    local r = l + 1
    local w = l   -- the worse child
    if r <= n and better(hs[l], ids[hd[l]], hs[r], ids[hd[r]]) then w = r end
    if better(hs[w], ids[hd[w]], score, ids[di]) then break end
    hs[i], hd[i] = hs[w], hd[w]
    i = w
  end
  hs[i], hd[i] = score, di
end

-- The texts of list[first..last] (items { id =, text = }) as a Lua array, each after prompt.
local function texts_of(list, first, last, prompt)
  local t = {}
  for i = first, last do t[#t + 1] = prompt and (prompt .. list[i].text) or list[i].text end
  return t
end

-- Embeds list[first..last] in batches of bs into a new tensor [last - first + 1, C]; with
-- normalize, each row L2-normalised (torch.nn.functional.normalize's eps 1e-12).
local ops_mod
local function embed_rows(embed_fn, list, first, last, bs, normalize, what, prompt)
  ops_mod = ops_mod or require("trainer.core.ops")
  local runtime = require("trainer.core.runtime")
  local C = require("trainer.core.ffi")
  local out
  for s = first, last, bs do
    local e = math.min(s + bs - 1, last)
    local texts = texts_of(list, s, e, prompt)
    T.scope(function()
      local emb = embed_fn(texts, prompt and { prompt = prompt } or nil)
      want_tensor(emb, #texts, what)
      if normalize then emb = ops_mod.l2norm(emb, 1e-12) end
      if not out then
        out = T.keep(T.empty({ last - first + 1, emb:shape()[2] }, { dtype = emb:dtype(), device = emb:device(),
          tag = "activations" }))
      end
      local view = out:narrow(s - first, #texts)
      runtime.check(C.tr_tensor_copy(runtime.ctx, view:ptr(), emb:ptr()), "evaluate." .. what)
      view:free()
    end)
  end
  return out
end

-- A tensor's values as a host float array (an FFI buffer) of its numel entries.
local function host_floats(t)
  local runtime = require("trainer.core.runtime")
  local C = require("trainer.core.ffi")
  local n = t:numel()
  local host = t
  if t:device() ~= "cpu" or t:dtype() ~= "f32" then host = t:to({ dtype = "f32", device = "cpu", tag = "workspace" }) end
  local buf = ffi.new("float[?]", math.max(n, 1))
  runtime.check(C.tr_tensor_read(runtime.ctx, host:ptr(), buf, n * 4), "evaluate.ir")
  if host ~= t then host:free() end
  return buf
end

-- Scores every query of qemb [queries, C] against docs [n, C], the corpus chunk whose first
-- document is number c0, qb queries at a time (one [qb, n] matmul each), and pushes each
-- score into its query's heap of the best k: heaps[1 + the query's row]; ids: the corpus
-- ids that break ties (heap_push).
local function push_scores(qemb, docs, c0, qb, heaps, k, ids)
  local ops = require("trainer.core.ops")
  local nq, n = qemb:shape()[1], docs:shape()[1]
  for q0 = 0, nq - 1, qb do
    local m = math.min(qb, nq - q0)
    T.scope(function()
      local qv = qemb:narrow(q0, m)
      local scores = ops.matmul(qv, docs, { trans_b = true, dtype = "f32", tag = "workspace" })
      local v = host_floats(scores)
      for qi = 0, m - 1 do
        local h, base = heaps[q0 + qi + 1], qi * n
        for j = 0, n - 1 do
          local sc = v[base + j]
          -- fast path: a full heap whose worst beats this score outright keeps it out
          if h.n < k or sc >= h.s[1] then heap_push(h, k, sc, c0 + j, ids) end
        end
      end
    end)
  end
end

local function max_of(list) local m = 0 for _, v in ipairs(list) do m = math.max(m, v) end return m end

-- ST's metrics of ranked hits (lists of corpus ids, best first) against the relevant sets.
local function ir_metrics(ranked, qids, relevant, ks, prefix, out)
  local nq = #qids
  local function dcg(rel, k)
    local d = 0
    for i = 1, math.min(#rel, k) do d = d + rel[i] / (math.log(i + 1) / math.log(2)) end
    return d
  end
  local acc, prec, rec, mrr, ndcg, map = {}, {}, {}, {}, {}, {}
  for _, k in ipairs(ks.accuracy_at_k) do acc[k] = 0 end
  for _, k in ipairs(ks.precision_recall_at_k) do prec[k], rec[k] = 0, 0 end
  for _, k in ipairs(ks.mrr_at_k) do mrr[k] = 0 end
  for _, k in ipairs(ks.ndcg_at_k) do ndcg[k] = 0 end
  for _, k in ipairs(ks.map_at_k) do map[k] = 0 end
  for q = 1, nq do
    local hits, rel = ranked[q], relevant[qids[q]]
    local nrel = 0
    for _ in pairs(rel) do nrel = nrel + 1 end
    for _, k in ipairs(ks.accuracy_at_k) do
      for i = 1, math.min(k, #hits) do if rel[hits[i]] then acc[k] = acc[k] + 1 break end end
    end
    for _, k in ipairs(ks.precision_recall_at_k) do
      local c = 0
      for i = 1, math.min(k, #hits) do if rel[hits[i]] then c = c + 1 end end
      prec[k], rec[k] = prec[k] + c / k, rec[k] + c / nrel
    end
    for _, k in ipairs(ks.mrr_at_k) do
      for i = 1, math.min(k, #hits) do if rel[hits[i]] then mrr[k] = mrr[k] + 1 / i break end end
    end
    for _, k in ipairs(ks.ndcg_at_k) do
      local pred, ideal = {}, {}
      for i = 1, math.min(k, #hits) do pred[i] = rel[hits[i]] and 1 or 0 end
      for i = 1, nrel do ideal[i] = 1 end
      ndcg[k] = ndcg[k] + dcg(pred, k) / dcg(ideal, k)
    end
    for _, k in ipairs(ks.map_at_k) do
      local c, sum = 0, 0
      for i = 1, math.min(k, #hits) do
        if rel[hits[i]] then c = c + 1 sum = sum + c / i end
      end
      map[k] = map[k] + sum / math.min(k, nrel)
    end
  end
  for k, v in pairs(acc) do out[prefix .. "accuracy@" .. k] = v / nq end
  for k, v in pairs(prec) do out[prefix .. "precision@" .. k] = v / nq end
  for k, v in pairs(rec) do out[prefix .. "recall@" .. k] = v / nq end
  for k, v in pairs(mrr) do out[prefix .. "mrr@" .. k] = v / nq end
  for k, v in pairs(ndcg) do out[prefix .. "ndcg@" .. k] = v / nq end
  for k, v in pairs(map) do out[prefix .. "map@" .. k] = v / nq end
end

local function check_items(list, what, role)
  if type(list) ~= "table" then errors.user("evaluate.ir: %s must be a list of { id =, text = }", role) end
  for i, it in ipairs(list) do
    if type(it) ~= "table" or type(it.id) ~= "string" or type(it.text) ~= "string" then
      errors.user("evaluate.%s: %s item %d must be { id = string, text = string }", what, role, i)
    end
  end
end

function M.ir(embed_fn, queries, corpus, relevant, opts)
  opts = opts or {}
  check_items(queries, "ir", "queries")
  check_items(corpus, "ir", "corpus")
  if #corpus == 0 then errors.user("evaluate.ir: the corpus is empty") end
  if type(relevant) ~= "table" then errors.user("evaluate.ir: relevant must map query ids to sets of corpus ids") end
  local ks = {}
  for key, def in pairs(IR_DEFAULTS) do ks[key] = opts[key] or def end
  local max_k = 0
  for _, list in pairs(ks) do max_k = math.max(max_k, max_of(list)) end
  local names = similarity_names(opts, "ir")
  local bs = opts.batch_size or 32
  local chunk = opts.corpus_chunk_size or M.IR_CHUNK
  local tile = opts.tile or M.IR_TILE
  -- the queries that have a relevant document, in the given order (ST's queries_ids)
  local qs, qids = {}, {}
  for _, q in ipairs(queries) do
    local rel = relevant[q.id]
    if type(rel) == "table" and next(rel) ~= nil then qs[#qs + 1] = q qids[#qids + 1] = q.id end
  end
  if #qs == 0 then errors.user("evaluate.ir: no query has a relevant document") end
  -- the corpus embedded shortest first (as sentence-transformers' encode sorts by length), so
  -- that a batch pads little; the ranks depend on scores and ids alone, not on this order
  local shortest = {}
  for i = 1, #corpus do shortest[i] = i end
  table.sort(shortest, function(a, b)
    local la, lb = #corpus[a].text, #corpus[b].text
    if la ~= lb then return la < lb end
    return a < b
  end)
  local by_length = {}
  for i, o in ipairs(shortest) do by_length[i] = corpus[o] end
  corpus = by_length
  local cids = {}
  for i, d in ipairs(corpus) do cids[i] = d.id end
  local heaps = {}
  for _, name in ipairs(names) do
    heaps[name] = {}
    for q = 1, #qs do heaps[name][q] = { s = {}, d = {}, n = 0 } end
  end
  local qemb = {}
  local ok, err = pcall(function()
    for _, name in ipairs(names) do
      qemb[name] = embed_rows(embed_fn, qs, 1, #qs, bs, name == "cosine", "ir", opts.query_prompt)
    end
    for c0 = 1, #corpus, chunk do
      local c1 = math.min(c0 + chunk - 1, #corpus)
      local nc = c1 - c0 + 1
      local qb = math.max(1, math.floor(tile / nc))
      for _, name in ipairs(names) do
        T.scope(function()
          local docs = embed_rows(embed_fn, corpus, c0, c1, bs, name == "cosine", "ir", opts.corpus_prompt)
          push_scores(qemb[name], docs, c0, qb, heaps[name], max_k, cids)
          docs:free()
        end)
      end
    end
  end)
  for _, t in pairs(qemb) do t:free() end
  if not ok then error(err, 0) end
  local out = {}
  for _, name in ipairs(names) do
    local ranked = {}
    for q, h in ipairs(heaps[name]) do
      local order = {}
      for i = 1, h.n do order[i] = i end
      table.sort(order, function(a, b) return better(h.s[a], cids[h.d[a]], h.s[b], cids[h.d[b]]) end)
      local r = {}
      for i, o in ipairs(order) do r[i] = cids[h.d[o]] end
      ranked[q] = r
    end
    ir_metrics(ranked, qids, relevant, ks, name .. "_", out)
  end
  return out
end

-- What trainer.train.mine shares with the IR search.
M.embed_rows, M.host_floats, M.push_scores, M.better = embed_rows, host_floats, push_scores, better

-- ---------------------------------------------------------------- triplets
function M.triplet(embed_fn, triplets, opts)
  opts = opts or {}
  local names = similarity_names(opts, "triplet")
  local bs = opts.batch_size or 32
  local margin = opts.margin or 0
  if type(triplets) ~= "table" or #triplets == 0 then errors.user("evaluate.triplet: needs at least one triplet") end
  local pos, neg = {}, {}
  for _, n in ipairs(names) do pos[n], neg[n] = {}, {} end
  for s = 1, #triplets, bs do
    local ta, tp, tn = {}, {}, {}
    for i = s, math.min(s + bs - 1, #triplets) do
      local t = triplets[i]
      local a, p, n
      if type(t) == "table" then a, p, n = t[1] or t.anchor, t[2] or t.positive, t[3] or t.negative end
      if type(a) ~= "string" or type(p) ~= "string" or type(n) ~= "string" then
        errors.user("evaluate.triplet: triplet %d must be { anchor, positive, negative } texts", i)
      end
      ta[#ta + 1], tp[#tp + 1], tn[#tn + 1] = a, p, n
    end
    T.scope(function()
      local ea = embed_fn(ta) want_tensor(ea, #ta, "triplet")
      local ep = embed_fn(tp) want_tensor(ep, #tp, "triplet")
      local en = embed_fn(tn) want_tensor(en, #tn, "triplet")
      row_similarities(ea, ep, names, pos)
      row_similarities(ea, en, names, neg)
    end)
  end
  local out, best = {}, -math.huge
  for _, n in ipairs(names) do
    local hit = 0
    for i = 1, #triplets do if pos[n][i] > neg[n][i] + margin then hit = hit + 1 end end
    local acc = f32(hit / #triplets)   -- ST's mean is a float32 one
    out[n .. "_accuracy"] = acc
    best = math.max(best, acc)
  end
  if #names > 1 then out.max_accuracy = best end
  return out
end

-- ---------------------------------------------------------------- binary classification
-- Rows sorted by score, best first (stable, as Python's sorted).
local function sorted_rows(scores, labels)
  local idx = {}
  for i = 1, #scores do idx[i] = i end
  table.sort(idx, function(a, b)
    if scores[a] ~= scores[b] then return scores[a] > scores[b] end
    return a < b
  end)
  return idx
end

-- ST's find_best_acc_and_threshold (higher score = more similar).
local function best_accuracy(scores, labels, idx)
  local n = #labels
  local negatives = 0
  for i = 1, n do if labels[i] == 0 then negatives = negatives + 1 end end
  -- the threshold that calls every pair dissimilar: just above the highest score
  local max_acc = negatives / n
  local best = next_f32(scores[idx[1]])
  local pos_so_far = 0
  for i = 1, n do
    local s, l = scores[idx[i]], labels[idx[i]]
    if l == 1 then pos_so_far = pos_so_far + 1 else negatives = negatives - 1 end
    local last = i == n
    if last or s ~= scores[idx[i + 1]] then
      local acc = (pos_so_far + negatives) / n
      if acc > max_acc then
        max_acc = acc
        best = last and s or f32((s + scores[idx[i + 1]]) / 2)
        -- a rounded midpoint must not include the next score group
        if not last and best == scores[idx[i + 1]] then best = s end
      end
    end
  end
  return max_acc, best
end

-- ST's find_best_f1_and_threshold.
local function best_f1(scores, labels, idx)
  local n, total = #labels, 0
  for i = 1, n do total = total + labels[i] end
  local bf, bp, br, thr = 0, 0, 0, 0
  local extracted, correct = 0, 0
  for i = 1, n do
    local s, l = scores[idx[i]], labels[idx[i]]
    extracted = extracted + 1
    if l == 1 then correct = correct + 1 end
    local last = i == n
    if (last or s ~= scores[idx[i + 1]]) and correct > 0 then
      local p, r = correct / extracted, correct / total
      local f = 2 * p * r / (p + r)
      if f > bf then
        bf, bp, br = f, p, r
        thr = last and s or f32((s + scores[idx[i + 1]]) / 2)
        if not last and thr == scores[idx[i + 1]] then thr = s end
      end
    end
  end
  return bf, bp, br, thr
end

-- scikit-learn's average_precision_score: sum over distinct thresholds of
-- (R_n - R_{n-1}) * P_n.
local function average_precision(scores, labels, idx)
  local n, total = #labels, 0
  for i = 1, n do total = total + labels[i] end
  local ap, tp, fp, prev_r = 0, 0, 0, 0
  for i = 1, n do
    if labels[idx[i]] == 1 then tp = tp + 1 else fp = fp + 1 end
    if i == n or scores[idx[i]] ~= scores[idx[i + 1]] then
      local r = tp / total
      ap = ap + (r - prev_r) * (tp / (tp + fp))
      prev_r = r
    end
  end
  return ap
end

local function mcc(scores, labels, thr)
  local tp, tn, fp, fn = 0, 0, 0, 0
  for i = 1, #labels do
    local p = scores[i] >= thr
    if p and labels[i] == 1 then tp = tp + 1
    elseif p then fp = fp + 1
    elseif labels[i] == 1 then fn = fn + 1
    else tn = tn + 1 end
  end
  local d = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
  if d == 0 then return 0 end
  return (tp * tn - fp * fn) / math.sqrt(d)
end

function M.binary(embed_fn, pair_list, labels, opts)
  opts = opts or {}
  local names = similarity_names(opts, "binary")
  local bs = opts.batch_size or 32
  if type(pair_list) ~= "table" or type(labels) ~= "table" or #pair_list ~= #labels or #pair_list == 0 then
    errors.user("evaluate.binary: needs pairs and one 0/1 label per pair (got %s pairs, %s labels)",
      type(pair_list) == "table" and #pair_list or type(pair_list), type(labels) == "table" and #labels or type(labels))
  end
  local npos = 0
  for i, l in ipairs(labels) do
    if l ~= 0 and l ~= 1 then errors.user("evaluate.binary: label %d is %s; labels must be 0 or 1", i, tostring(l)) end
    npos = npos + l
  end
  if npos == 0 then errors.user("evaluate.binary: no pair has label 1; average precision needs a positive pair") end
  local sims = {}
  for _, n in ipairs(names) do sims[n] = {} end
  for s = 1, #pair_list, bs do
    local ta, tb = {}, {}
    for i = s, math.min(s + bs - 1, #pair_list) do ta[#ta + 1], tb[#tb + 1] = pair_texts(pair_list[i], i, "binary") end
    T.scope(function()
      local e1 = embed_fn(ta) want_tensor(e1, #ta, "binary")
      local e2 = embed_fn(tb) want_tensor(e2, #tb, "binary")
      row_similarities(e1, e2, names, sims)
    end)
  end
  local out, per = {}, {}
  for _, n in ipairs(names) do
    local sc = sims[n]
    local idx = sorted_rows(sc, labels)
    local acc, acc_thr = best_accuracy(sc, labels, idx)
    local f1, p, r, f1_thr = best_f1(sc, labels, idx)
    local m = { accuracy = acc, accuracy_threshold = acc_thr, f1 = f1, f1_threshold = f1_thr, precision = p,
                recall = r, ap = average_precision(sc, labels, idx), mcc = mcc(sc, labels, f1_thr) }
    per[#per + 1] = m
    for k, v in pairs(m) do out[n .. "_" .. k] = v end
  end
  if #names > 1 then
    for k in pairs(per[1]) do
      local best = -math.huge
      for _, m in ipairs(per) do best = math.max(best, m[k]) end
      out["max_" .. k] = best
    end
  end
  return out
end

M.evaluate_sts, M.evaluate_nli = M.sts, M.nli

return M
