-- trainer.train.eval_sets: the evaluators a recipe names in eval.sets, each with its data,
-- and running them on a model.
--
--   eval.sets = {
--     scifact = { type = "ir", folder = "data/scifact", split = "test" },      -- BEIR layout
--     dev_triplets = { type = "triplet", file = "data/dev_triplets.jsonl" },   -- anchor, positive, negative
--     quora = { type = "binary", file = "data/quora_dev.jsonl" },              -- sentence1, sentence2, label
--     stsb = { type = "sts", file = "data/stsb_dev.jsonl" },                   -- sentence1, sentence2, score
--     mnli = { type = "nli", file = "data/mnli_dev.jsonl" },                   -- sentence1, sentence2, label (classifiers)
--   }
--
--   eval_sets.load(recipe) -> sets (sorted by name) or nil: every file read and checked
--       (at build time, so that a bad file stops the run before the model is loaded)
--   eval_sets.run(sets, embed_fn, classify_fn, opts) -> scores: each evaluator's metrics
--       under "<set name>_<metric>" (sentence-transformers' name_ prefix), e.g.
--       scifact_cosine_ndcg@10, dev_triplets_cosine_accuracy, quora_cosine_ap,
--       stsb_spearman, mnli_accuracy.
local errors = require("trainer.core.errors")

local M = {}

local DEFAULT_COLUMNS = {
  triplet = { "anchor", "positive", "negative" },
  binary = { "sentence1", "sentence2", "label" },
  sts = { "sentence1", "sentence2", "score" },
  nli = { "sentence1", "sentence2", "label" },
}

-- The rows of a pair or triplet file (trainer.train.data: a line naming the problem).
local function read_rows(recipe, name, spec)
  local data = require("trainer.train.data")
  local columns = spec.columns or DEFAULT_COLUMNS[spec.type]
  local d = recipe.data or {}
  local ds = data.open(spec.file, { columns = columns, label_map = spec.type == "nli" and d.label_map or nil },
    { seed = recipe.seed })
  local rows = {}
  for row in ds:iter() do rows[#rows + 1] = row end
  local summary = ds:summary()
  ds:close()
  if #rows == 0 then errors.user("eval.sets.%s: %s: no rows", name, spec.file) end
  local want = spec.type == "triplet" and 3 or 2
  for _, r in ipairs(rows) do
    for c = 1, want do
      if type(r[c]) ~= "string" then
        errors.user("%s: line %s: column %s must be text", spec.file, tostring(r.line), columns[c])
      end
    end
    if spec.type ~= "triplet" and type(r[#r]) ~= "number" then
      errors.user("%s: line %s: no numeric %s in column %s", spec.file, tostring(r.line),
        spec.type == "sts" and "score" or "label", columns[#columns])
    end
    if spec.type == "binary" and r[#r] ~= 0 and r[#r] ~= 1 then
      errors.user("%s: line %s: label %s must be 0 or 1", spec.file, tostring(r.line), tostring(r[#r]))
    end
  end
  return rows, summary
end

function M.load(recipe)
  local sets = recipe.eval and recipe.eval.sets
  if not sets then return nil end
  local names = {}
  for name in pairs(sets) do names[#names + 1] = name end
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local spec = sets[name]
    local set = { name = name, spec = spec, type = spec.type }
    if spec.type == "ir" then
      set.queries, set.corpus, set.relevant, set.summary = require("trainer.train.beir").load(spec, "eval.sets." .. name)
    else
      set.rows, set.summary = read_rows(recipe, name, spec)
    end
    out[#out + 1] = set
  end
  return out
end

-- The evaluator of one set; its metrics under name_metric into scores.
local function run_one(set, embed_fn, classify_fn, opts, scores)
  local evaluate = require("trainer.train.evaluate")
  local spec = set.spec
  local o = { batch_size = opts.batch_size, similarity_fn_names = spec.similarity_fn_names,
              corpus_chunk_size = spec.corpus_chunk_size, margin = spec.margin, query_prompt = spec.query_prompt,
              corpus_prompt = spec.corpus_prompt }
  for key in pairs(require("trainer.train.evaluate").ir_defaults) do o[key] = spec[key] end
  local r
  if set.type ~= "nli" and not embed_fn then
    errors.user("eval.sets.%s: type %q evaluates embeddings; this model is a classifier (use type \"nli\")",
      set.name, set.type)
  end
  if set.type == "ir" then
    r = evaluate.ir(embed_fn, set.queries, set.corpus, set.relevant, o)
  elseif set.type == "triplet" then
    r = evaluate.triplet(embed_fn, set.rows, o)
  else
    local pairs_, gold = {}, {}
    for i, row in ipairs(set.rows) do pairs_[i], gold[i] = { row[1], row[2] }, row[#row] end
    if set.type == "binary" then
      r = evaluate.binary(embed_fn, pairs_, gold, o)
    elseif set.type == "sts" then
      r = evaluate.sts(embed_fn, pairs_, gold, o)
    else
      if not classify_fn then
        errors.user("eval.sets.%s: type \"nli\" needs a classifier (model.task = \"classification\")", set.name)
      end
      r = evaluate.nli(classify_fn, pairs_, gold, o)
    end
    r.n = nil
  end
  for k, v in pairs(r) do scores[set.name .. "_" .. k] = v end
end

function M.run(sets, embed_fn, classify_fn, opts)
  local scores = {}
  for _, set in ipairs(sets) do run_one(set, embed_fn, classify_fn, opts or {}, scores) end
  return scores
end

-- The data each set read, for summary.json's eval_data.
function M.summaries(sets)
  local out = {}
  for _, set in ipairs(sets) do out[set.name] = set.summary end
  return out
end

return M
