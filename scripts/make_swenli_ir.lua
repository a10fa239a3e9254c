-- scripts/make_swenli_ir.lua [OUT_DIR]: the retrieval task of recipes/minilm_retrieval.lua, built
-- from the shipped SweNLI dev split (data/swenli_dev.jsonl.gz, CC BY 4.0, see data/README.md).
-- The premises that have an entailed hypothesis are the queries, in the order they first appear;
-- every fifth of them (the 1st, 6th, ...) is held out. Writes into OUT_DIR (default build/swenli_ir):
--   train_pairs.jsonl     {"anchor": premise, "positive": entailed hypothesis} of the training premises
--   train_corpus.txt      every hypothesis of the training premises (entailed, neutral, contradicted),
--                         one a line: the candidates `trainer mine` draws hard negatives from
--   test/corpus.jsonl     every hypothesis of the held-out premises, entailed, neutral and contradicted
--                         ({"_id": "h<n>", "text": ...}), each once: the premise's own neutral and
--                         contradicted hypotheses are the hard distractors (the whole file's 9,801
--                         would quintuple the evaluation's time on a CPU)
--   test/queries.jsonl    the held-out premises ({"_id": "q<n>", "text": ...})
--   test/qrels/test.tsv   each held-out premise's entailed hypotheses
-- Deterministic: the same files on every run.
local json = require("trainer.core.json")
local native = require("trainer.native")
local sys = require("trainer.core.sys")
local out = arg[1] or "build/swenli_ir"
local src = native.root() .. "/data/swenli_dev.jsonl.gz"

local ds = require("trainer.train.data").open(src, { columns = { "premise", "hypothesis", "label" },
  label_map = { entailment = 0, neutral = 1, contradiction = 2 } }, { seed = 0 })
local premises, by_premise, hyps, hyp_id = {}, {}, {}, {}
for r in ds:iter() do
  local p, h, label = r[1], r[2], r[3]
  if not by_premise[p] then
    by_premise[p] = { entailed = {}, all = {} }
    premises[#premises + 1] = p
  end
  local e = by_premise[p]
  e.all[#e.all + 1] = h
  if label == 0 then e.entailed[#e.entailed + 1] = h end
  if not hyp_id[h] then hyps[#hyps + 1] = h hyp_id[h] = "h" .. #hyps end
end
ds:close()

assert(sys.mkdir_p(out .. "/test/qrels"))
local function open(path) return assert(io.open(out .. "/" .. path, "w")) end
local pairs_f, corpus_f = open("train_pairs.jsonl"), open("train_corpus.txt")
local queries_f, qrels_f = open("test/queries.jsonl"), open("test/qrels/test.tsv")
qrels_f:write("query-id\tcorpus-id\tscore\n")
local nq, ntrain, npairs, seen, test_hyps = 0, 0, 0, {}, {}
for _, p in ipairs(premises) do
  local e = by_premise[p]
  if #e.entailed > 0 then
    nq = nq + 1
    if nq % 5 == 1 then
      local id = "q" .. nq
      queries_f:write(json.encode({ _id = id, text = p }), "\n")
      for _, h in ipairs(e.entailed) do qrels_f:write(id, "\t", hyp_id[h], "\t1\n") end
      for _, h in ipairs(e.all) do
        if not test_hyps[h] then test_hyps[h] = true test_hyps[#test_hyps + 1] = h end
      end
    else
      ntrain = ntrain + 1
      for _, h in ipairs(e.entailed) do
        pairs_f:write(json.encode({ anchor = p, positive = h }), "\n")
        npairs = npairs + 1
      end
      for _, h in ipairs(e.all) do
        if not seen[h] then seen[h] = true corpus_f:write((h:gsub("\n", " ")), "\n") end
      end
    end
  end
end
local corpus_out = open("test/corpus.jsonl")
for _, h in ipairs(test_hyps) do corpus_out:write(json.encode({ _id = hyp_id[h], text = h }), "\n") end
for _, f in ipairs({ pairs_f, corpus_f, queries_f, qrels_f, corpus_out }) do f:close() end
io.write(("make_swenli_ir: %d training pairs of %d premises; %d held-out queries over a corpus of %d hypotheses, in %s\n")
  :format(npairs, ntrain, nq - ntrain, #test_hyps, out))
