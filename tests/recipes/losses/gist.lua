-- GISTEmbedLoss on SweNLI triplets (anchor, entailed, contradicted), the guide model given as
-- loss.teacher on the command line like model.from.
return {
  extends = "base.lua",
  data = { train = "data/swenli_dev.jsonl.gz", columns = { "premise", "hypothesis", "label" }, max_rows = 2000,
           build = "nli_triplets" },
  loss = { name = "gist", temperature = 0.05, teacher = "set loss.teacher on the command line" },
}
