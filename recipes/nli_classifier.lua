-- recipes/nli_classifier.lua — a BERT sequence-classification head trained with
-- cross_entropy on NLI pairs (premise, hypothesis) -> entailment / neutral / contradiction,
-- evaluated by accuracy. The encoder is all-MiniLM-L6-v2 (a new, randomly initialised
-- head goes on top, as transformers does for a model without one); any BERT folder works:
--   trainer recipes/nli_classifier.lua model.from=models/scandi-nli-large data.train=...
-- The data is the SweNLI dev file that ships in data/ (Swedish NLI pairs), split by
-- premise into a training file and a held-out evaluation file by a script:
--   bash scripts/prepare_nli_data.sh     # data/nli_train.jsonl.gz, data/nli_eval.jsonl.gz
--   bash scripts/fetch_minilm.sh         # the encoder, into models/
--   trainer recipes/nli_classifier.lua
-- Point data.train / data.eval at your own JSONL/TSV/CSV files with the same fields.
return {
  description = "NLI classifier: BERT + classification head + cross_entropy, accuracy on held-out pairs",
  model = { from = "models/all-MiniLM-L6-v2", hub = "sentence-transformers/all-MiniLM-L6-v2",
            task = "classification", num_labels = 3, labels = { "entailment", "neutral", "contradiction" },
            max_length = 128 },
  data = {
    train = "data/nli_train.jsonl.gz",
    eval = "data/nli_eval.jsonl.gz",
    columns = { "premise", "hypothesis", "label" },
    eval_columns = { "premise", "hypothesis", "label" },
    label_map = { entailment = 0, neutral = 1, contradiction = 2 },
    max_rows = 4000,
    hint = "run `bash scripts/prepare_nli_data.sh`: it makes both files from data/swenli_dev.jsonl.gz, which ships "
      .. "with the project",
  },
  loss = { name = "cross_entropy" },
  optim = { name = "adamw", lr = 5e-5 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  batch = { size = 16 },
  epochs = 1,
  eval = { every = 100 },
  save = { every = 100, keep = 2 },
  out = "runs/nli_classifier",
}
