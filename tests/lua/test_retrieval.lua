-- The retrieval evaluators (trainer.train.evaluate.ir, triplet, binary) against
-- sentence-transformers' InformationRetrievalEvaluator, TripletEvaluator and
-- BinaryClassificationEvaluator (tests/data/retrieval_golden.json, written by
-- tests/ref/make_retrieval_golden.py): on ST's own embeddings and on tiny_bert's run here;
-- the chunked search against one chunk, ties ranked by corpus id, memory returned; the
-- BEIR reader's errors naming the file and the line.
local T = require("trainer.core.tensor")
local json = require("trainer.core.json")
local evaluate = require("trainer.train.evaluate")
local beir = require("trainer.train.beir")
local errors = require("trainer.core.errors")
local memory = require("trainer.core.memory")
local native = require("trainer.native")
local sys = require("trainer.core.sys")

local root = native.root()
local data = root .. "/tests/data"
local golden = json.read(data .. "/retrieval_golden.json")
local BOTH = { similarity_fn_names = { "cosine", "dot" } }

local function raises(fn, pattern)
  local ok, e = pcall(fn)
  assert(not ok and errors.is_user_error(e), "expected a user error: " .. tostring(e))
  assert(errors.message(e):find(pattern, 1, true), ("message %q lacks %q"):format(errors.message(e), pattern))
end

-- ST's metric names carry the evaluator's name ("tiny_"); ours are unprefixed.
local function compare(ours, theirs, tol, what)
  local n = 0
  for k, v in pairs(theirs) do
    local mine = ours[k:gsub("^tiny_", "")]
    assert(mine ~= nil, ("%s: no %s in ours"):format(what, k))
    -- a threshold is a score (or the midpoint of two): ST computes it in float32 from float32
    -- embeddings, we in float64 (then rounded): 1e-6 relative
    local t = k:find("threshold", 1, true) and math.max(tol, 1e-6 * math.max(1, math.abs(v))) or tol
    assert(math.abs(mine - v) <= t, ("%s %s: %.12g vs sentence-transformers %.12g"):format(what, k, mine, v))
    n = n + 1
  end
  for k in pairs(ours) do assert(theirs["tiny_" .. k] ~= nil, ("%s: %s is not ST's"):format(what, k)) end
  assert(n > 0)
end

-- ST's embedding of each text (the golden's), as an embed function.
local function golden_embedder(texts)
  local rows = {}
  for i, t in ipairs(texts) do rows[i] = assert(golden.embeddings[t], "no golden embedding for " .. t) end
  return T.from_table(rows)
end

-- tiny_bert run here (eval mode), as an embed function.
local function model_embedder()
  local m = trainer.load_model(data .. "/tiny_bert", { on_warning = function() end })
  m:eval()
  local tk = require("trainer.core.tokenizer")
  local tok = tk.load(data .. "/tiny_bert")
  local function embed(texts)
    local b = tok:batch(texts, { max_length = 64 })
    local out = m:forward(b)
    tk.free_batch(b)
    return out
  end
  return embed, function() m:free() tok:free() end
end

local function rows_of(path)
  local out = {}
  for line in io.lines(path) do out[#out + 1] = json.decode(line) end
  return out
end

local function ir_data()
  return beir.load({ folder = data .. "/ir_tiny", split = "test" })
end

local function triplets()
  local t = {}
  for i, r in ipairs(rows_of(data .. "/triplets_tiny.jsonl")) do t[i] = { r.anchor, r.positive, r.negative } end
  return t
end

local function binary_pairs()
  local p, l = {}, {}
  for i, r in ipairs(rows_of(data .. "/pairs_binary_tiny.jsonl")) do p[i], l[i] = { r.sentence1, r.sentence2 }, r.label end
  return p, l
end

return {
  { "ir_on_st_embeddings_equals_information_retrieval_evaluator", function()
    local q, c, rel, summary = ir_data()
    assert(summary.documents == 60 and summary.queries_count == 14 and summary.queries_with_relevant == 12)
    compare(evaluate.ir(golden_embedder, q, c, rel, BOTH), golden.ir, 1e-12, "ir")
  end },
  { "ir_chunked_search_equals_one_chunk", function()
    collectgarbage()
    local before = memory.stats().allocated
    local q, c, rel = ir_data()
    local whole = evaluate.ir(golden_embedder, q, c, rel, BOTH)
    -- chunks of 7 documents, tiles of one query: the same ranks
    local chunked = evaluate.ir(golden_embedder, q, c, rel,
      { similarity_fn_names = { "cosine", "dot" }, corpus_chunk_size = 7, tile = 5, batch_size = 3 })
    for k, v in pairs(whole) do assert(chunked[k] == v, k) end
    collectgarbage()
    assert(memory.stats().allocated == before, "evaluate.ir must free its embeddings and scores")
  end },
  { "ir_model_equals_st_within_1e-6", function()
    local embed, free = model_embedder()
    local q, c, rel = ir_data()
    local ok, err = pcall(function()
      compare(evaluate.ir(embed, q, c, rel, { similarity_fn_names = { "cosine", "dot" }, batch_size = 8 }),
        golden.ir, 1e-6, "ir (tiny_bert)")
    end)
    free()
    assert(ok, err)
  end },
  { "ir_ties_rank_by_corpus_id", function()
    local embed = dofile(root .. "/tests/lua/testlib.lua").embed_numbers
    -- b and a score the same for q1: a ranks first (smaller id), whatever the file order or chunk
    local corpus = { { id = "b", text = "1,0" }, { id = "a", text = "1,0" }, { id = "c", text = "0,1" } }
    local queries = { { id = "q1", text = "1,0.1" }, { id = "q2", text = "0,1" }, { id = "q3", text = "1,1" } }
    local rel = { q1 = { b = true }, q2 = { c = true } }   -- q3: no relevant document, left out
    for _, chunk in ipairs({ 1, 2, 3 }) do
      local r = evaluate.ir(embed, queries, corpus, rel, { corpus_chunk_size = chunk })
      assert(r["cosine_mrr@10"] == (0.5 + 1) / 2, r["cosine_mrr@10"])
      assert(r["cosine_accuracy@1"] == 0.5 and r["cosine_recall@3"] == 1)
    end
    -- other k lists, and prompts put before the texts
    local seen = {}
    local function prompted(texts)
      for _, t in ipairs(texts) do seen[#seen + 1] = t end
      return embed((function() local o = {} for i, t in ipairs(texts) do o[i] = t:gsub("^[qd]:", "") end return o end)())
    end
    local r = evaluate.ir(prompted, queries, corpus, rel, { mrr_at_k = { 1, 2 }, ndcg_at_k = { 2 }, map_at_k = { 2 },
      accuracy_at_k = { 2 }, precision_recall_at_k = { 2 }, query_prompt = "q:", corpus_prompt = "d:" })
    assert(r["cosine_mrr@1"] == 0.5 and r["cosine_mrr@2"] == 0.75 and r["cosine_accuracy@2"] == 1 and r["cosine_mrr@10"] == nil)
    assert(seen[1]:match("^q:") and seen[#seen]:match("^d:"), "prompts")
    raises(function() evaluate.ir(embed, queries, {}, rel) end, "corpus is empty")
    raises(function() evaluate.ir(embed, queries, corpus, rel, { similarity_fn_names = { "l2" } }) end, "cosine, dot")
  end },
  { "triplet_and_binary_equal_st", function()
    compare(evaluate.triplet(golden_embedder, triplets(), BOTH), golden.triplet, 1e-12, "triplet")
    local p, l = binary_pairs()
    compare(evaluate.binary(golden_embedder, p, l, BOTH), golden.binary, 1e-12, "binary")
    local embed, free = model_embedder()
    local ok, err = pcall(function()
      compare(evaluate.triplet(embed, triplets(), BOTH), golden.triplet, 1e-6, "triplet (tiny_bert)")
      compare(evaluate.binary(embed, p, l, BOTH), golden.binary, 1e-6, "binary (tiny_bert)")
    end)
    free()
    assert(ok, err)
    raises(function() evaluate.binary(golden_embedder, p, (function() local z = {} for i = 1, #p do z[i] = 0 end return z end)()) end,
      "no pair has label 1")
  end },
  { "predicted_metric_names_are_the_evaluators", function()
    -- eval.primary is checked against eval_sets.metric_names before a run: they must be the
    -- names the evaluators return
    local es = require("trainer.train.eval_sets")
    local function keys(prefix, t)
      local k = {}
      for x in pairs(t) do k[#k + 1] = prefix .. x end
      table.sort(k)
      return table.concat(k, ",")
    end
    local q, c, rel = ir_data()
    local p, l = binary_pairs()
    for _, fns in ipairs({ { "cosine" }, { "dot", "cosine" } }) do
      local o = { similarity_fn_names = fns, mrr_at_k = { 1, 5 }, map_at_k = { 7 } }
      local sets = { a = { type = "ir", similarity_fn_names = fns, mrr_at_k = { 1, 5 }, map_at_k = { 7 } },
                     t = { type = "triplet", similarity_fn_names = fns }, b = { type = "binary", similarity_fn_names = fns } }
      local predicted = table.concat(es.metric_names({ eval = { sets = sets }, model = {} }), ",")
      local got = {}
      for _, part in ipairs({ keys("a_", evaluate.ir(golden_embedder, q, c, rel, o)),
                              keys("b_", evaluate.binary(golden_embedder, p, l, o)),
                              keys("t_", evaluate.triplet(golden_embedder, triplets(), o)) }) do
        for n in part:gmatch("[^,]+") do got[#got + 1] = n end
      end
      table.sort(got)
      assert(predicted == table.concat(got, ","), predicted .. "\n" .. table.concat(got, ","))
    end
    assert(table.concat(es.metric_names({ eval = { sets = {} }, data = { eval = "x" }, model = {} }), ",") == "pearson,spearman")
    assert(es.metric_names({ eval = { fn = print }, model = {} }) == nil)
  end },
  { "plan_bounds_the_ir_memory", function()
    -- 3000 documents, 200 queries, chunks of 1000: the plan's bytes against the measured peak
    local dir = os.tmpname()
    os.remove(dir)
    sys.mkdir_p(dir .. "/qrels")
    local c = assert(io.open(dir .. "/corpus.jsonl", "w"))
    for i = 1, 3000 do c:write(('{"_id": "d%d", "text": "%d"}\n'):format(i, i)) end
    c:close()
    local q, r = assert(io.open(dir .. "/queries.jsonl", "w")), assert(io.open(dir .. "/qrels/test.tsv", "w"))
    for i = 1, 200 do
      q:write(('{"_id": "q%d", "text": "%d"}\n'):format(i, i * 13))
      r:write(("q%d\td%d\t1\n"):format(i, i * 11))
    end
    q:close() r:close()
    local H = 32
    local function embed(texts)   -- a text "n" embeds as sin(n * j), j = 1..H
      local rows = {}
      for i, t in ipairs(texts) do
        local row = {}
        for j = 1, H do row[j] = math.sin(tonumber(t) * j) end
        rows[i] = row
      end
      return T.from_table(rows)
    end
    local spec = { type = "ir", folder = dir, corpus_chunk_size = 1000 }
    local est = require("trainer.plan.eval").estimate({ eval = { sets = { s = spec } } }, H)[1]
    assert(est.documents == 3000 and est.queries == 200 and est.chunk == 1000)
    assert(est.bytes == 4 * H * 200 + 4 * H * 1000 + 4 * 200 * 1000, est.bytes)
    local queries, corpus, rel = beir.load(spec)
    collectgarbage()
    local before = memory.stats().allocated
    memory.reset_peak()
    evaluate.ir(embed, queries, corpus, rel, { corpus_chunk_size = 1000, batch_size = 32 })
    local used = memory.stats().peak_allocated - before
    sys.remove_tree(dir)
    assert(used <= est.bytes * 1.10 and used >= est.bytes * 0.8,
      ("measured %d bytes while evaluating, the plan says %d"):format(used, est.bytes))
  end },
  { "beir_errors_name_the_file_and_line", function()
    local dir = os.tmpname()
    os.remove(dir)
    sys.mkdir_p(dir .. "/qrels")
    local function write(name, text) local f = assert(io.open(dir .. "/" .. name, "w")) f:write(text) f:close() end
    write("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"title": "x", "text": "b"}\n')
    write("queries.jsonl", '{"_id": "q1", "text": "a"}\n')
    write("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    raises(function() beir.load({ folder = dir }) end, dir .. "/corpus.jsonl: line 2: no _id")
    write("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "b"}\n')
    write("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\n")
    raises(function() beir.load({ folder = dir }) end, dir .. "/qrels/test.tsv: line 3: document \"d9\" is not in the corpus")
    write("qrels/test.tsv", "q2\td1\t1\n")
    raises(function() beir.load({ folder = dir }) end, "line 1: query \"q2\" is not in the queries")
    write("corpus.jsonl", "")
    raises(function() beir.load({ folder = dir }) end, dir .. "/corpus.jsonl: the corpus is empty")
    write("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n')
    raises(function() beir.load({ folder = dir }) end, "line 2: _id \"d1\" repeats line 1")
    write("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": 12345678901234567, "text": "b"}\n')
    raises(function() beir.load({ folder = dir }) end, "line 2: _id 12345678901234568 is a number too large")
    write("corpus.jsonl", '{"_id": "d1", "text": "a"}\n')
    raises(function() beir.load({ folder = dir, split = "dev" }) end, "qrels/dev.tsv: cannot open")
    sys.remove_tree(dir)
  end },
}
