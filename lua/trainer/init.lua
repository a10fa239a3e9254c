-- trainer: the module recipes, scripts and the REPL see as `trainer` (also a global).
-- Submodules load on first use, so `trainer check` never makes a context or touches a GPU.
local native = require("trainer.native")
local sys = require("trainer.core.sys")

local trainer = {
  version = sys.version(),
  root = native.root(),
}

local lazy = {
  recipe = "trainer.recipe",
  schema = "trainer.recipe.schema",
  pretty = "trainer.cli.pretty",
  errors = "trainer.core.errors",
  tensor = "trainer.core.tensor",
  memory = "trainer.core.memory",
  runtime = "trainer.core.runtime",
  losses = "trainer.losses",
  metrics = "trainer.train.metrics",
  evaluate = "trainer.train.evaluate",
  data = "trainer.train.data",
  ops = "trainer.core.ops",
  amp = "trainer.train.amp",
  json = "trainer.core.json",
  optim = "trainer.train.optim",
  schedule = "trainer.train.schedule",
  clip = "trainer.train.clip",
  nn = "trainer.nn",
  models = "trainer.models",
  safetensors = "trainer.core.safetensors",
  tokenizer = "trainer.core.tokenizer",
  checkpoint = "trainer.train.grad_checkpoint",
  step = "trainer.train.step",
  loop = "trainer.train.loop",
  run = "trainer.train.run",
  outputs = "trainer.train.outputs",
  progress = "trainer.train.progress",
  lora = "trainer.train.lora",
}

setmetatable(trainer, {
  __keys = lazy,   -- the REPL's Tab completion lists these before they are loaded
  __index = require("trainer.core.lazy").index(lazy),
})

-- A Hugging Face model folder as a trainer.nn model (see lua/trainer/models/init.lua).
function trainer.load_model(dir, opts)
  return require("trainer.models").load_model(dir, opts)
end

-- Parses a size such as "8GiB" into bytes (numbers pass through).
function trainer.bytes(v)
  local n, why = require("trainer.recipe.schema").parse_size(v)
  if not n then error(why, 2) end
  return n
end

return trainer
