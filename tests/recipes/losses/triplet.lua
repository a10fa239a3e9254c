-- TripletLoss on SweNLI built into (anchor, entailed, contradicted) triplets.
return {
  extends = "base.lua",
  data = { train = "data/swenli_dev.jsonl.gz", columns = { "premise", "hypothesis", "label" }, max_rows = 2000,
           build = "nli_triplets" },
  loss = { name = "triplet" },
}
