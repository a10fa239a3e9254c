-- trainer.train.mine: hard-negative mining with sentence-transformers' mine_hard_negatives
-- semantics (util/hard_negatives.py), by exact search in chunks.
--
--   local rows, stats = mine.run(embed_fn, pairs, opts)
--     pairs: a list of { anchor, positive } texts
--     embed_fn(texts, { prompt = p }) -> a NEW tensor [#texts, C] (as the evaluators take it)
--     opts: corpus (a list of more candidate texts), num_negatives (3), range_min (0),
--           range_max (default as ST: range_min + num_negatives + max_positives, or with
--           10 * num_negatives where a margin or max_score filters), max_score, min_score,
--           margin (ST's absolute_margin), relative_margin, sampling ("top" | "random"), seed
--           (random sampling), format ("triplet" | "n-tuple"), query_prompt, corpus_prompt,
--           batch_size, corpus_chunk_size, tile, progress (function(done, total, what): texts embedded)
--     rows: triplet:  { anchor, positive, negative, scores = { pos, neg } }, one per negative
--           n-tuple:  { anchor, positive, negatives = { ... }, scores = { pos, neg_1, ... } }, one
--                     per (anchor, positive) with num_negatives negatives found
--     stats: { queries, corpus, range_max, skipped = { margin =, relative_margin =, max_score =,
--              min_score = }, missing (queries with fewer negatives than asked) }
--
-- As ST: the corpus is opts.corpus then the positives, each text once (first seen); the
-- anchors each once (first seen), every positive of an anchor (its rows' positives, each once)
-- is skipped as a candidate; embeddings are L2-normalised and scored by cosine; the
-- range_max + max_positives best candidates of each anchor are kept (ties: the earlier corpus
-- text first); then margins, max_score and min_score drop candidates (a margin against the
-- anchor's lowest positive score), range_min of the rest are skipped and num_negatives taken
-- from the top or at random (then ordered best first).
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")
local evaluate = require("trainer.train.evaluate")

local M = {}

local NEG_INF = -math.huge

local function check_opts(o, max_positives)
  local nn = o.num_negatives or 3
  if nn < 1 then errors.user("mine: --num-negatives must be at least 1, got %s", tostring(nn)) end
  local rmin = o.range_min or 0
  if rmin < 0 then errors.user("mine: --range-min must be non-negative, got %s", tostring(rmin)) end
  local rmax = o.range_max
  if rmax == nil then
    local filtered = o.margin ~= nil or o.relative_margin ~= nil or o.max_score ~= nil
    rmax = rmin + (filtered and nn * 10 or nn) + max_positives
  end
  if rmin >= rmax then
    errors.user("mine: --range-min must be smaller than --range-max, got %d and %d", rmin, rmax)
  end
  if nn > rmax - rmin then
    errors.user("mine: cannot mine %d negatives per anchor: only %d candidates remain after skipping the first "
      .. "--range-min=%d of --range-max=%d; lower --num-negatives or --range-min, or raise --range-max", nn,
      rmax - rmin, rmin, rmax)
  end
  local sampling = o.sampling or "top"
  if sampling ~= "top" and sampling ~= "random" then
    errors.user("mine: --sampling must be top or random, got %q", tostring(sampling))
  end
  local format = o.format or "triplet"
  if format ~= "triplet" and format ~= "n-tuple" then
    errors.user("mine: --format must be triplet or n-tuple, got %q", tostring(format))
  end
  return nn, rmin, rmax, sampling, format
end

-- A seeded generator (a linear congruential one: the same picks on every machine).
local function rng_of(seed)
  local s = (seed or 12345) % 2147483648
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    return math.floor(s / 2147483648 * n) + 1
  end
end

function M.run(embed_fn, pairs_, opts)
  opts = opts or {}
  if type(pairs_) ~= "table" or #pairs_ == 0 then errors.user("mine: no (anchor, positive) rows to mine for") end
  -- the anchors (first seen), the positives of each, and the corpus (opts.corpus then the positives)
  local anchors, anchor_idx, rows_per = {}, {}, {}
  for _, r in ipairs(pairs_) do
    local a = r[1]
    if not anchor_idx[a] then
      anchors[#anchors + 1] = a
      anchor_idx[a] = #anchors
      rows_per[#anchors] = 0
    end
    rows_per[anchor_idx[a]] = rows_per[anchor_idx[a]] + 1
  end
  local max_positives = 0
  for _, n in ipairs(rows_per) do max_positives = math.max(max_positives, n) end
  local nn, rmin, rmax, sampling, format = check_opts(opts, max_positives)
  local corpus, corpus_idx = {}, {}
  local function add(t)
    if not corpus_idx[t] then corpus[#corpus + 1] = t corpus_idx[t] = #corpus end
  end
  for _, t in ipairs(opts.corpus or {}) do add(t) end
  for _, r in ipairs(pairs_) do add(r[2]) end
  local nq, nc = #anchors, #corpus
  local pos_of, is_pos = {}, {}   -- per anchor: its positives' corpus indices (each once), as a set too
  for q = 1, nq do pos_of[q], is_pos[q] = {}, {} end
  for _, r in ipairs(pairs_) do
    local q, d = anchor_idx[r[1]], corpus_idx[r[2]]
    if not is_pos[q][d] then is_pos[q][d] = true; pos_of[q][#pos_of[q] + 1] = d end
  end
  local wanted = {}   -- corpus indices whose embeddings the positive scores need
  for q = 1, nq do for _, d in ipairs(pos_of[q]) do wanted[d] = true end end

  local K = rmax + max_positives
  local bs = opts.batch_size or 32
  local chunk = opts.corpus_chunk_size or evaluate.IR_CHUNK
  local tile = opts.tile or evaluate.IR_TILE
  local progress = opts.progress or function() end
  -- progress: texts embedded of the anchors and the corpus
  local embedded, to_embed, inner = 0, nq + nc, embed_fn
  embed_fn = function(texts, eopts)
    local e = inner(texts, eopts)
    embedded = embedded + #texts
    progress(embedded, to_embed, "embedding")
    return e
  end
  -- the corpus embedded shortest first (less padding); heaps rank by score, then corpus index
  local order = {}
  for i = 1, nc do order[i] = i end
  table.sort(order, function(a, b)
    local la, lb = #corpus[a], #corpus[b]
    if la ~= lb then return la < lb end
    return a < b
  end)
  local sorted_items = {}
  for i, o in ipairs(order) do sorted_items[i] = { text = corpus[o] } end
  local qitems = {}
  for i, a in ipairs(anchors) do qitems[i] = { text = a } end
  local heaps = {}
  for q = 1, nq do heaps[q] = { s = {}, d = {}, n = 0 } end
  local qhost, C
  local pos_emb = {}   -- corpus index -> { floats } for the positives
  local qemb
  local ok, err = pcall(function()
    qemb = evaluate.embed_rows(embed_fn, qitems, 1, nq, bs, true, "mine", opts.query_prompt)
    C = qemb:shape()[2]
    qhost = evaluate.host_floats(qemb)
    for c0 = 1, nc, chunk do
      local c1 = math.min(c0 + chunk - 1, nc)
      local n = c1 - c0 + 1
      local qb = math.max(1, math.floor(tile / n))
      T.scope(function()
        local docs = evaluate.embed_rows(embed_fn, sorted_items, c0, c1, bs, true, "mine", opts.corpus_prompt)
        local need = false
        for j = c0, c1 do if wanted[order[j]] then need = true break end end
        if need then
          local dh = evaluate.host_floats(docs)
          for j = c0, c1 do
            local d = order[j]
            if wanted[d] then
              local v, base = {}, (j - c0) * C
              for c = 1, C do v[c] = dh[base + c - 1] end
              pos_emb[d] = v
            end
          end
        end
        evaluate.push_scores(qemb, docs, c0, qb, heaps, K, order)
        docs:free()
      end)
    end
  end)
  if qemb then qemb:free() end
  if not ok then error(err, 0) end

  -- per anchor: candidates best first (ties: the earlier corpus text), then filtered
  local stats = { queries = nq, corpus = nc, range_max = rmax, missing = 0,
                  skipped = { margin = 0, relative_margin = 0, max_score = 0, min_score = 0 } }
  local rnd = rng_of(opts.seed)
  local out = {}
  for q = 1, nq do
    local h = heaps[q]
    local cand = {}
    for i = 1, h.n do cand[i] = { s = h.s[i], d = order[h.d[i]] } end
    table.sort(cand, function(a, b) return evaluate.better(a.s, a.d, b.s, b.d) end)
    -- the positives' scores (cosine of the normalised embeddings), and the lowest of them
    local pscore, minpos = {}, math.huge
    for k, d in ipairs(pos_of[q]) do
      local e, s = pos_emb[d], 0
      for c = 1, C do s = s + qhost[(q - 1) * C + c - 1] * e[c] end
      pscore[k] = s
      minpos = math.min(minpos, s)
    end
    local scores = {}
    for i = 1, K do
      local c = cand[i]
      local s = c and c.s or NEG_INF
      if c and is_pos[q][c.d] then s = NEG_INF end
      scores[i] = s
    end
    local function drop(key, test)
      for i = 1, K do
        if scores[i] ~= NEG_INF and test(scores[i]) then scores[i] = NEG_INF; stats.skipped[key] = stats.skipped[key] + 1 end
      end
    end
    if opts.margin then drop("margin", function(s) return s + opts.margin > minpos end) end
    if opts.relative_margin then
      local th = minpos - math.abs(minpos) * opts.relative_margin
      drop("relative_margin", function(s) return s > th end)
    end
    if opts.max_score then drop("max_score", function(s) return s > opts.max_score end) end
    if opts.min_score then drop("min_score", function(s) return s < opts.min_score end) end
    -- the range_max best (the dropped ones last, in rank order), less the first range_min
    local kept = {}
    for i = 1, K do if scores[i] ~= NEG_INF then kept[#kept + 1] = i end end
    for i = 1, K do if scores[i] == NEG_INF then kept[#kept + 1] = i end end
    local window = {}
    for i = rmin + 1, rmax do window[#window + 1] = kept[i] end
    local picked = {}
    if sampling == "top" then
      for i = 1, nn do picked[i] = window[i] end
    else
      local options = 0
      for _, i in ipairs(window) do if scores[i] ~= NEG_INF then options = options + 1 end end
      options = math.max(options, nn)
      local pool = {}
      for i = 1, options do pool[i] = window[i] end
      for i = 1, nn do
        local j = i - 1 + rnd(options - i + 1)
        pool[i], pool[j] = pool[j], pool[i]
        picked[i] = pool[i]
      end
      table.sort(picked, function(a, b)
        if scores[a] ~= scores[b] then return scores[a] > scores[b] end
        return a < b
      end)
    end
    local negs, nscores, found = {}, {}, 0
    for i, ci in ipairs(picked) do
      if scores[ci] ~= NEG_INF then found = found + 1 end
      negs[i], nscores[i] = cand[ci] and corpus[cand[ci].d], scores[ci]
    end
    if found < nn then stats.missing = stats.missing + 1 end
    for k, d in ipairs(pos_of[q]) do
      if format == "triplet" then
        for i = 1, nn do
          if nscores[i] ~= NEG_INF then
            out[#out + 1] = { anchors[q], corpus[d], negs[i], scores = { pscore[k], nscores[i] } }
          end
        end
      elseif found == nn then
        local s = { pscore[k] }
        for i = 1, nn do s[i + 1] = nscores[i] end
        out[#out + 1] = { anchors[q], corpus[d], negatives = negs, scores = s }
      end
    end
  end
  return out, stats
end

return M
