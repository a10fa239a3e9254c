return {
  model = { arch = "bert", config = "tiny", init = "random" }
  optim = { lr = 1e-4 },
}
