-- ContrastiveLoss on SweNLI pairs: entailment 1, contradiction 0, neutral left out.
return {
  extends = "base.lua",
  data = {
    train = "data/swenli_dev.jsonl.gz", columns = { "premise", "hypothesis", "label" }, max_rows = 400,
    label_map = { entailment = 1, contradiction = 0 },
    filter = function(row) return row.label ~= "neutral" end,
  },
  loss = { name = "contrastive" },
}
