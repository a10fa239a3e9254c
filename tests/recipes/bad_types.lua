return {
  model = { arch = "bert", config = "tiny", init = "random" },
  optim = { lr = "fast", name = "adam" },
  batch = { size = 0 },
  precision = "bf32",
  lorra = { r = 8 },
  hooks = { on_step = 5 },
  checkpoint = { segmnts = 2 },
}
