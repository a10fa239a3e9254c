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

-- The metric names a run's evaluation will report (data.eval's and eval.sets'), or nil when
-- eval.fn decides them; sorted.
function M.metric_names(recipe)
  if recipe.eval.fn then return nil end
  local names, classifier = {}, recipe.model and recipe.model.task == "classification"
  if recipe.data and recipe.data.eval then
    if classifier then names[#names + 1] = "accuracy" else names[#names + 1] = "spearman" names[#names + 1] = "pearson" end
  end
  local defaults = require("trainer.train.evaluate").ir_defaults
  for name, spec in pairs(recipe.eval.sets or {}) do
    local fns, seen = {}, {}
    for _, f in ipairs(spec.similarity_fn_names or { "cosine" }) do
      if not seen[f] then seen[f] = true fns[#fns + 1] = f end
    end
    local function add(m) names[#names + 1] = name .. "_" .. m end
    if spec.type == "ir" then
      local lists = { accuracy = spec.accuracy_at_k or defaults.accuracy_at_k,
        precision = spec.precision_recall_at_k or defaults.precision_recall_at_k,
        recall = spec.precision_recall_at_k or defaults.precision_recall_at_k, mrr = spec.mrr_at_k or defaults.mrr_at_k,
        ndcg = spec.ndcg_at_k or defaults.ndcg_at_k, map = spec.map_at_k or defaults.map_at_k }
      for _, f in ipairs(fns) do
        for m, ks in pairs(lists) do for _, k in ipairs(ks) do add(("%s_%s@%d"):format(f, m, k)) end end
      end
    elseif spec.type == "triplet" or spec.type == "binary" then
      local ms = spec.type == "triplet" and { "accuracy" }
        or { "accuracy", "accuracy_threshold", "f1", "f1_threshold", "precision", "recall", "ap", "mcc" }
      for _, m in ipairs(ms) do
        for _, f in ipairs(fns) do add(f .. "_" .. m) end
        if #fns > 1 then add("max_" .. m) end
      end
    elseif spec.type == "sts" then add("spearman") add("pearson")
    elseif spec.type == "nli" then add("accuracy") end
  end
  table.sort(names)
  return names
end

-- eval.primary against the names the evaluation will report: a typo stops the run before
-- the model is loaded, not at its first evaluation.
local function check_primary(recipe)
  local primary = recipe.eval.primary
  local names = primary and M.metric_names(recipe)
  if not names then return end
  for _, n in ipairs(names) do if n == primary then return end end
  errors.user("eval.primary = %q is not a metric of this run's evaluation%s; it has: %s", primary,
    require("trainer.recipe.suggest").hint(primary, names), #names > 0 and table.concat(names, ", ") or "none")
end

function M.load(recipe)
  check_primary(recipe)
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
  -- a prompt by name: the model's (opts.model.prompts), as sentence-transformers' query_prompt_name
  local prompts = require("trainer.models.prompts")
  if spec.query_prompt_name and not o.query_prompt then
    o.query_prompt = prompts.resolve(opts.model or {}, spec.query_prompt_name)
  end
  if spec.corpus_prompt_name and not o.corpus_prompt then
    o.corpus_prompt = prompts.resolve(opts.model or {}, spec.corpus_prompt_name)
  end
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
