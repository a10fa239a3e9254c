-- MarginMSELoss distillation on SweNLI triplets (anchor, entailed, contradicted): the
-- teacher's margin q.p - q.n of each row against the student's.
return {
  extends = "base.lua",
  data = { train = "data/swenli_dev.jsonl.gz", columns = { "premise", "hypothesis", "label" }, max_rows = 2000,
           build = "nli_triplets" },
  loss = { name = "margin_mse", teacher = "set loss.teacher on the command line" },
}
