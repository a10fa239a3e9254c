-- trainer: the module recipes, scripts and the REPL see as `trainer` (also a global).
-- Submodules load on first use, so `trainer check` never touches the FFI or a GPU.
local native = require("trainer.native")

local trainer = {
  version = native.version(),
  root = native.root(),
}

local lazy = {
  recipe = "trainer.recipe",
  schema = "trainer.schema",
  pretty = "trainer.pretty",
  errors = "trainer.errors",
  tensor = "trainer.tensor",
  memory = "trainer.memory",
  runtime = "trainer.runtime",
  losses = "trainer.losses",
  metrics = "trainer.metrics",
  evaluate = "trainer.evaluate",
  data = "trainer.data",
  ops = "trainer.ops",
  amp = "trainer.amp",
  json = "trainer.json",
  optim = "trainer.optim",
  schedule = "trainer.schedule",
  clip = "trainer.clip",
  nn = "trainer.nn",
  models = "trainer.models",
  safetensors = "trainer.safetensors",
  tokenizer = "trainer.tokenizer",
  optim = "trainer.optim",
  schedule = "trainer.schedule",
  clip = "trainer.clip",
  checkpoint = "trainer.checkpoint",
  step = "trainer.step",
  loop = "trainer.loop",
  run = "trainer.run",
  outputs = "trainer.outputs",
  progress = "trainer.progress",
  lora = "trainer.lora",
}

setmetatable(trainer, {
  __keys = lazy,   -- the REPL's Tab completion lists these before they are loaded
  __index = function(t, k)
    local name = lazy[k]
    if not name then return nil end
    local mod = require(name)
    rawset(t, k, mod)
    return mod
  end,
})

-- A Hugging Face model folder as a trainer.nn model (see lua/trainer/models/init.lua).
function trainer.load_model(dir, opts)
  return require("trainer.models").load_model(dir, opts)
end

-- Parses a size such as "8GiB" into bytes (numbers pass through).
function trainer.bytes(v)
  local n, why = require("trainer.schema").parse_size(v)
  if not n then error(why, 2) end
  return n
end

return trainer
