-- recipes/scandi_lora.lua — the flagship job: LoRA fine-tuning of a Scandinavian NLI
-- BERT-large (alexandrainst/scandi-nli-large: 24 layers, hidden 1024, 16 heads, vocab
-- 50,000, uncased without accent stripping) into a sentence-embedding model, with MNRL on
-- (premise, entailed hypothesis) pairs and the contradiction as a hard negative.
-- bf16 + checkpointing + LoRA keep a 1.3 GB model well inside a small GPU's memory.
-- The data ships with the project: SweNLI dev (SuperLim 2, CC BY 4.0; data/README.md), so
-- only the model needs downloading:
--
--   huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large
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
    train = "data/swenli_dev.jsonl.gz",  -- SweNLI dev: 9,815 Swedish NLI pairs (no train split here)
    -- (anchor, entailed hypothesis, contradiction) triplets built from the file's NLI pairs, as
    -- sentence-transformers' AllNLI script does; columns name the file's fields
    build = "nli_triplets",
    columns = { "premise", "hypothesis", "label" },
    hint = "it ships with the project (data/README.md): restore it with `git checkout data/swenli_dev.jsonl.gz`",
  },
  -- the segmentation of least peak memory for this shape (`trainer plan` lists each choice)
  checkpoint = "auto",
  loss = { name = "mnrl", scale = 20 },
  optim = { name = "adamw", lr = 2e-5 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  batch = { size = 16 },
  out = "runs/scandi_lora",
}
