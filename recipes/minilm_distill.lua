-- recipes/minilm_distill.lua — knowledge distillation (sentence-transformers' MSELoss, its
-- model_distillation example): the student all-MiniLM-L6-v2 (6 layers) learns to reproduce the
-- sentence embeddings of the bigger all-MiniLM-L12-v2 (12 layers, the same 384 dimensions) on
-- the STS Benchmark train sentences. The teacher (loss.teacher, a model folder) embeds both
-- columns of every batch without gradients, and the loss is the mean squared difference of the
-- student's embeddings from them; the STS-B dev split is scored before and after (Spearman of
-- cosine similarity), so the student's scores can be compared with the teacher's.
-- Full fine-tuning (no LoRA): the student is to become a copy of the teacher, not to adapt.
--
--   bash scripts/fetch_minilm.sh          # the student (or: make fetch-models)
--   huggingface-cli download sentence-transformers/all-MiniLM-L12-v2 --local-dir models/all-MiniLM-L12-v2
--   trainer recipes/minilm_distill.lua
--   trainer recipes/minilm_distill.lua loss.teacher=models/OTHER   # any 384-dimension embedder
return {
  extends = "base/minilm_cpu.lua",
  description = "all-MiniLM-L6-v2 distilled from all-MiniLM-L12-v2 (MSE of embeddings) on STS-B sentences",
  data = {
    train = "data/stsb_train.jsonl.gz",
    eval = "data/stsb_dev.jsonl.gz",
    columns = { "sentence1", "sentence2" },
    eval_columns = { "sentence1", "sentence2", "score" },
  },
  loss = { name = "mse", teacher = "models/all-MiniLM-L12-v2" },
  optim = { lr = 1e-4 },
  batch = { size = 16 },
  steps = 100,
  eval = { at_start = true, batch_size = 128 },
  out = "runs/minilm_distill",
}
