-- recipes/stsb_batch_hard_triplet.lua — a label-based recipe: all-MiniLM-L6-v2 + LoRA trained
-- with BatchHardTripletLoss to group STS-B sentences by their source corpus (headlines, image
-- captions, video captions, news paraphrases, forums): each batch holds several sentences of
-- each corpus (data.sampler = "group_by_label", sentence-transformers' GROUP_BY_LABEL), and
-- every anchor is pulled to its farthest same-corpus sentence and pushed from its closest
-- other-corpus one. No evaluation file: data.label_map maps the training labels, and the
-- STS-B dev scores are not corpus names.
--
--   bash scripts/fetch_minilm.sh          # or: make fetch-models
--   trainer recipes/stsb_batch_hard_triplet.lua
return {
  extends = "base/minilm_cpu.lua",
  description = "all-MiniLM-L6-v2 + LoRA + BatchHardTripletLoss over STS-B sentences labelled by source corpus",
  data = {
    train = "data/stsb_train.jsonl.gz",
    columns = { "sentence1", "dataset" },
    label_map = { headlines = 0, MSRvid = 1, images = 2, MSRpar = 3, ["deft-forum"] = 4, ["deft-news"] = 5 },
    sampler = "group_by_label",
  },
  loss = { name = "batch_hard_triplet", margin = 5 },
  lora = { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" } },
  optim = { lr = 5e-4 },
  batch = { size = 32 },
  steps = 100,
  out = "runs/stsb_batch_hard_triplet",
}
