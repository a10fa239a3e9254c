-- recipes/scandi_lora.lua — the flagship job: LoRA fine-tuning of a Scandinavian NLI
-- BERT-large (alexandrainst/scandi-nli-large: 24 layers, hidden 1024, 16 heads, vocab
-- 50,000, uncased without accent stripping) into a sentence-embedding model, with MNRL on
-- (premise, entailed hypothesis) pairs and the contradiction as a hard negative.
-- bf16 + checkpointing + LoRA keep a 1.3 GB model well inside a small GPU's memory.
--
--   huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large
--   scripts/prepare_nli_data.sh          # data/scandi_nli.jsonl.gz
--   trainer recipes/scandi_lora.lua
--   trainer recipes/scandi_lora.lua optim.lr=1e-4 batch.size=8
local sizes = require("base.sizes")

return {
  extends = "base/lora_bf16.lua",
  name = "scandi_lora",
  model = {
    from = "models/scandi-nli-large",
    hub = "alexandrainst/scandi-nli-large",
    pooling = "mean",
    max_length = sizes.max_length,
  },
  data = {
    train = "data/scandi_nli.jsonl.gz",
    build = "nli_triplets",            -- (anchor, entailed hypothesis, contradiction) as AllNLI
    columns = { "anchor", "positive", "negative" },
    hint = "run scripts/prepare_nli_data.sh (Swedish NLI from the shared data collection)",
  },
  loss = { name = "mnrl", scale = 20 },
  optim = { name = "adamw", lr = 2e-5 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  batch = { size = 16 },
  out = "runs/scandi_lora",
}
