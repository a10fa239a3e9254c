-- recipes/minilm_retrieval.lua — retrieval fine-tuning of sentence-transformers/all-MiniLM-L6-v2
-- with MultipleNegativesRankingLoss on (premise, entailed hypothesis, mined hard negative)
-- triplets from the shipped SweNLI dev split (data/swenli_dev.jsonl.gz, CC BY 4.0), evaluated as
-- information retrieval (NDCG@10 ...) on held-out premises before and after training:
-- each held-out premise is a query, its entailed hypotheses are the relevant documents among
-- all hypotheses of the held-out premises (its own neutral and contradicted ones included).
--
--   bash scripts/fetch_minilm.sh                           # or: make fetch-models
--   bash scripts/retrieval_demo.sh                         # the four steps below, then the table
--   trainer run scripts/make_swenli_ir.lua                 # build/swenli_ir: pairs, pool, test set
--   trainer mine models/all-MiniLM-L6-v2 build/swenli_ir/train_pairs.jsonl \
--     --corpus build/swenli_ir/train_corpus.txt --num-negatives 1 --range-max 40 \
--     --relative-margin 0.05 --out build/swenli_ir/train_triplets.jsonl
--   trainer recipes/minilm_retrieval.lua
--   trainer run scripts/retrieval_result.lua runs/minilm_retrieval   # NDCG@10 before and after
-- The hard negatives are the hypotheses (of the training premises) nearest each premise, other
-- than its entailed ones, at least 5 % of the positive's score below it (NV-Retriever's
-- TopK-PercPos); as in sentence-transformers' triplet output, a pair without such a candidate
-- is left out (about 1,660 triplets of the 2,783 pairs). 45 steps of 32: about one epoch.
-- On a shared 2-core CPU (mining about 10 minutes, training with both evaluations 4.5 minutes):
--                     NDCG@10  MRR@10  Recall@10  Accuracy@1
--   before training:   0.5457  0.5167     0.6768      0.4144
--   after  training:   0.6593  0.6294     0.7928      0.5152
return {
  extends = "base/minilm_cpu.lua",
  description = "all-MiniLM-L6-v2 + MNRL on SweNLI premise -> entailed hypothesis triplets with mined hard negatives, "
    .. "evaluated as retrieval on held-out premises",
  data = {
    train = "build/swenli_ir/train_triplets.jsonl",
    columns = { "anchor", "positive", "negative" },
    hint = "run `trainer run scripts/make_swenli_ir.lua` and `trainer mine ...` first (see the top of "
      .. "recipes/minilm_retrieval.lua), or bash scripts/retrieval_demo.sh",
  },
  loss = { name = "mnrl", scale = 20 },
  optim = { lr = 5e-5 },
  batch = { size = 32 },
  steps = 45,
  eval = {
    at_start = true, batch_size = 128, primary = "swenli_cosine_ndcg@10",
    sets = { swenli = { type = "ir", folder = "build/swenli_ir/test" } },
  },
  log = { every = 5 },
  out = "runs/minilm_retrieval",
}
