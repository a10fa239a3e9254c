-- MSELoss distillation on STS-B sentence pairs: the teacher (loss.teacher, given on the
-- command line like model.from) embeds both columns of each batch.
return {
  extends = "base.lua",
  data = { train = "data/stsb_train.jsonl.gz", columns = { "sentence1", "sentence2" }, max_rows = 200 },
  loss = { name = "mse", teacher = "set loss.teacher on the command line" },
}
