-- recipes/base/embedding.lua — a team's defaults for training sentence-embedding models.
-- Not run on its own: recipes extend it and override what differs, e.g.
--   return { extends = "base/embedding.lua", model = { from = "models/x" }, data = { ... } }
return {
  description = "sentence embeddings with in-batch negatives (MultipleNegativesRankingLoss)",
  seed = 42,
  model = { pooling = "mean" },
  loss = { name = "mnrl", scale = 20 },
  optim = { name = "adamw", lr = 2e-5, weight_decay = 0.01 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  batch = { size = 16, accumulate = 1 },
  epochs = 1,
  grad_clip = 1.0,
  log = { every = 10 },
  save = { keep = 3 },
}
