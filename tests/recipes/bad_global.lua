return {
  model = { arch = "bert", config = "tiny", init = "random" },
  batch = { size = batch_size },
}
