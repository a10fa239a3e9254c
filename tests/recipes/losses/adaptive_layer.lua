-- AdaptiveLayerLoss around MNRL on SweNLI triplets (anchor, entailed, contradicted): each step
-- the final layer's loss, one earlier layer's and its KL term.
return {
  extends = "base.lua",
  data = { train = "data/swenli_dev.jsonl.gz", columns = { "premise", "hypothesis", "label" }, max_rows = 2000,
           build = "nli_triplets" },
  loss = { name = "adaptive_layer", inner = "mnrl", n_layers_per_step = 1 },
}
