-- recipes/base/minilm_cpu.lua — what the small all-MiniLM-L6-v2 examples share: the encoder
-- (sequences cut at 64 tokens), AdamW with weight decay under a linear schedule with a 10 %
-- warm-up, fp32 on the CPU, the last checkpoint kept, a log line every 10 steps.
-- Not run on its own: recipes/minilm_sts_lora.lua, minilm_distill.lua, minilm_retrieval.lua
-- and stsb_batch_hard_triplet.lua extend it with their data, loss, learning rate and length.
--   bash scripts/fetch_minilm.sh          # the encoder, into models/ (or: make fetch-models)
return {
  model = { from = "models/all-MiniLM-L6-v2", hub = "sentence-transformers/all-MiniLM-L6-v2", max_length = 64 },
  optim = { name = "adamw", weight_decay = 0.01 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  precision = "fp32",
  device = "cpu",
  save = { keep = 1 },
  log = { every = 10 },
}
