-- recipes/base/swenli_pairs.lua — training on the SweNLI pairs that ship in data/ (Swedish
-- premise, hypothesis, label), split by premise into a training file and a held-out
-- evaluation file, on all-MiniLM-L6-v2:
--   bash scripts/prepare_nli_data.sh     # data/nli_train.jsonl.gz, data/nli_eval.jsonl.gz
--   bash scripts/fetch_minilm.sh         # the encoder, into models/
-- Not run on its own: recipes/nli_classifier.lua and recipes/reranker_swenli.lua extend it
-- with their task, their mapping of the labels and their loss.
return {
  model = { from = "models/all-MiniLM-L6-v2", hub = "sentence-transformers/all-MiniLM-L6-v2", max_length = 128 },
  data = {
    train = "data/nli_train.jsonl.gz",
    eval = "data/nli_eval.jsonl.gz",
    columns = { "premise", "hypothesis", "label" },
    eval_columns = { "premise", "hypothesis", "label" },
    max_rows = 4000,
    hint = "run `bash scripts/prepare_nli_data.sh`: it makes both files from data/swenli_dev.jsonl.gz, which ships "
      .. "with the project",
  },
  optim = { name = "adamw", lr = 5e-5 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  batch = { size = 16 },
  epochs = 1,
  eval = { every = 100 },
  save = { every = 100, keep = 2 },
}
