-- AnglELoss on STS-B pairs with their 0-5 gold scores.
return {
  extends = "base.lua",
  data = { train = "data/stsb_train.jsonl.gz", columns = { "sentence1", "sentence2", "score" }, max_rows = 200 },
  loss = { name = "angle" },
}
