-- trainer.compat: the module names from before lua/trainer/ was laid out in folders
-- (docs/ARCHITECTURE.md), kept loadable for recipes and scripts written against them:
-- require("trainer.tensor") gives the same table as require("trainer.core.tensor").
-- Installed once, by trainer.cli, as a package searcher; the project's own code uses only
-- the new names (tests/lua/test_boundaries.lua checks it).
local M = {}

M.renamed = {
  ["trainer.amp"] = "trainer.train.amp",
  ["trainer.checkpoint"] = "trainer.train.grad_checkpoint",
  ["trainer.clip"] = "trainer.train.clip",
  ["trainer.command_line"] = "trainer.cli.model_args",
  ["trainer.data"] = "trainer.train.data",
  ["trainer.errors"] = "trainer.core.errors",
  ["trainer.evaluate"] = "trainer.train.evaluate",
  ["trainer.ffi"] = "trainer.core.ffi",
  ["trainer.json"] = "trainer.core.json",
  ["trainer.keys_doc"] = "trainer.recipe.keys_doc",
  ["trainer.loop"] = "trainer.train.loop",
  ["trainer.lora"] = "trainer.train.lora",
  ["trainer.memory"] = "trainer.core.memory",
  ["trainer.metrics"] = "trainer.train.metrics",
  ["trainer.ops"] = "trainer.core.ops",
  ["trainer.optim"] = "trainer.train.optim",
  ["trainer.outputs"] = "trainer.train.outputs",
  ["trainer.plan_alternatives"] = "trainer.plan.alternatives",
  ["trainer.plan_check"] = "trainer.plan.check",
  ["trainer.pretty"] = "trainer.cli.pretty",
  ["trainer.progress"] = "trainer.train.progress",
  ["trainer.recipe_schema"] = "trainer.recipe.keys",
  ["trainer.repl"] = "trainer.cli.repl",
  ["trainer.resume"] = "trainer.train.resume",
  ["trainer.rng_sites"] = "trainer.core.rng_sites",
  ["trainer.run"] = "trainer.train.run",
  ["trainer.runtime"] = "trainer.core.runtime",
  ["trainer.safetensors"] = "trainer.core.safetensors",
  ["trainer.schedule"] = "trainer.train.schedule",
  ["trainer.schema"] = "trainer.recipe.schema",
  ["trainer.step"] = "trainer.train.step",
  ["trainer.suggest"] = "trainer.recipe.suggest",
  ["trainer.tensor"] = "trainer.core.tensor",
  ["trainer.tokenizer"] = "trainer.core.tokenizer",
  ["trainer.trainer_state"] = "trainer.train.trainer_state",
  ["trainer.user_code"] = "trainer.train.user_code",
  ["trainer.utf8"] = "trainer.core.utf8",
}

local function search(name)
  local new = M.renamed[name]
  if not new and name:match("^trainer%.commands%.") then new = "trainer.cli." .. name:sub(#"trainer." + 1) end
  if not new then return nil end
  return function()
    local mod = require(new)
    package.loaded[name] = mod
    return mod
  end
end

function M.install()
  for _, s in ipairs(package.loaders) do
    if s == search then return end
  end
  table.insert(package.loaders, search)
end

return M
