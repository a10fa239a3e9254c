-- A cross-encoder (reranker) trained a few steps on the STS-B pairs that ship in data/: a new
-- one-logit head on the tiny BERT, bce on the 0-5 scores divided by 5 (sentence-transformers'
-- CrossEncoder STS-B example, in miniature). tests/cli/test_cross_encoder.sh and
-- tests/cudacpu/train_cross_encoder.sh run it; the paths are from the project's root.
return {
  description = "tiny cross-encoder, bce on STS-B pairs (test)",
  model = { from = "tests/data/tiny_bert", task = "cross_encoder", max_length = 64 },
  data = { train = "data/stsb_train.jsonl.gz", columns = { "sentence1", "sentence2", "score" }, max_rows = 64 },
  loss = { name = "bce", score_scale = 5 },
  optim = { name = "adamw", lr = 1e-3 },
  batch = { size = 8 },
  steps = 4,
  log = { every = 1, quiet = true },
  eval = { at_start = false },
  device = "cpu",
  seed = 3,
  out = "runs/test_cross_encoder",
}
