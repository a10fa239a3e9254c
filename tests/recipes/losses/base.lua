-- tests/recipes/losses/base.lua — what the loss recipes beside it share: a few steps of a
-- small encoder on the shipped data (data/). model.from is given on the command line (a
-- tiny folder the tests make: models.tiny_folder), with device= and out=:
--   trainer tests/recipes/losses/triplet.lua model.from=DIR device=cpu out=runs/x
-- Used by tests/cli/test_train_losses.sh and tests/cudacpu/train_losses.sh.
return {
  model = { from = "set model.from on the command line", max_length = 24 },
  optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 3,
  log = { every = 1, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 5,
}
