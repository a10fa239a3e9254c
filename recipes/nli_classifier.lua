-- recipes/nli_classifier.lua — a BERT sequence-classification head trained with
-- cross_entropy on NLI pairs (premise, hypothesis) -> entailment / neutral / contradiction,
-- evaluated by accuracy. The encoder is all-MiniLM-L6-v2 (a new, randomly initialised
-- head goes on top, as transformers does for a model without one); any BERT folder works:
--   trainer recipes/nli_classifier.lua model.from=models/scandi-nli-large data.train=...
-- The data and its preparation are recipes/base/swenli_pairs.lua's (the SweNLI dev file
-- that ships in data/, split by premise):
--   bash scripts/prepare_nli_data.sh     # data/nli_train.jsonl.gz, data/nli_eval.jsonl.gz
--   bash scripts/fetch_minilm.sh         # the encoder, into models/
--   trainer recipes/nli_classifier.lua
-- Point data.train / data.eval at your own JSONL/TSV/CSV files with the same fields.
return {
  extends = "base/swenli_pairs.lua",
  description = "NLI classifier: BERT + classification head + cross_entropy, accuracy on held-out pairs",
  model = { task = "classification", num_labels = 3, labels = { "entailment", "neutral", "contradiction" } },
  data = { label_map = { entailment = 0, neutral = 1, contradiction = 2 } },
  loss = { name = "cross_entropy" },
  out = "runs/nli_classifier",
}
