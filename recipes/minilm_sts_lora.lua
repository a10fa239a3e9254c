-- recipes/minilm_sts_lora.lua — the `make demo` job: LoRA fine-tuning of
-- sentence-transformers/all-MiniLM-L6-v2 with CoSENT on the STS Benchmark train split,
-- evaluated (Spearman and Pearson of cosine similarity against the gold scores) on the
-- STS-B dev split before and after. Sized to finish within 10 minutes on a 2-core CPU.
--
--   bash scripts/fetch_minilm.sh          # or: make fetch-models
--   trainer recipes/minilm_sts_lora.lua
--   trainer report runs/minilm_sts_lora    # loss, lr, dev scores and memory as an SVG
return {
  extends = "base/minilm_cpu.lua",
  description = "all-MiniLM-L6-v2 + LoRA + CoSENT on STS-B train, evaluated on STS-B dev",
  data = {
    train = "data/stsb_train.jsonl.gz",
    eval = "data/stsb_dev.jsonl.gz",
    columns = { "sentence1", "sentence2", "score" },
    eval_columns = { "sentence1", "sentence2", "score" },
  },
  loss = { name = "cosent", scale = 20 },
  lora = { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" } },
  optim = { lr = 5e-4 },
  batch = { size = 16 },
  steps = 120,
  eval = { at_start = true, batch_size = 128 },
  save = { keep = 2 },
  out = "runs/minilm_sts_lora",
}
