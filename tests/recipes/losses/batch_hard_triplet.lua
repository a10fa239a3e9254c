-- BatchHardTripletLoss over STS-B's first sentences labelled by their source corpus, batches
-- of several rows per corpus (data.sampler = "group_by_label").
return {
  extends = "base.lua",
  data = {
    train = "data/stsb_train.jsonl.gz", columns = { "sentence1", "dataset" }, sampler = "group_by_label",
    label_map = { headlines = 0, MSRvid = 1, images = 2, MSRpar = 3, ["deft-forum"] = 4, ["deft-news"] = 5 },
  },
  loss = { name = "batch_hard_triplet" },
}
