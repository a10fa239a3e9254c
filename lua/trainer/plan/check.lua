-- trainer.plan.check: a run's model config and memory plan, checked before it allocates.
--
--   require("trainer.plan.check").check(recipe, device, path)   -- in trainer.run.build
--
-- First the model's config (config.json of model.from, or model.config) goes through its
-- family's config check (trainer.models.config_of: the registry chooses the family by
-- model_type or model.arch), which names the file and the field of any mistyped or
-- out-of-range value. Then trainer.plan predicts the run's ledger (the same figures as
-- `trainer plan`) and compares its total with what the run may use: memory.limit, or the
-- device itself (the host's RAM on the CPU, the card's memory on a GPU), whichever is
-- smaller. A run predicted not to fit stops at once with the ledger, as an out-of-memory
-- error (exit 2), instead of growing memory for minutes first. trainer.plan is called,
-- never changed: a plan it cannot make (a recipe it does not model) lets the run go on.
local errors = require("trainer.core.errors")
local schema = require("trainer.recipe.schema")

local M = {}

-- Validates the config the model will be built from; returns it checked (or nil when the
-- folder has no config.json, which trainer.models.check_folder names, or the recipe
-- names a preset that build_model reports).
function M.check_config(m)
  return (require("trainer.models").config_of(m))
end

-- The bytes this run may use on device and the words that say where that comes from;
-- nil when nothing is known (no limit, and the system does not tell).
function M.capacity(recipe, device)
  local C = require("trainer.core.ffi")
  local dev, dev_what
  if device == "cpu" then
    dev, dev_what = tonumber(C.tr_host_memory_bytes()), "this machine's RAM"
  else
    local n = tonumber(device:match("^cuda:(%d+)$") or 0)
    dev, dev_what = tonumber(C.tr_cuda_device_memory_bytes(n)), device .. "'s memory"
  end
  if dev == 0 then dev = nil end
  local limit = recipe.memory and recipe.memory.limit
  local n = limit and schema.parse_size(limit) or nil
  if n and n > 0 and (not dev or n <= dev) then
    return n, ("memory.limit = %s"):format(type(limit) == "string" and limit or schema.format_size(n))
  end
  if dev then return dev, ("%s (%s)"):format(dev_what, schema.format_size(dev)) end
  return nil
end

-- Validates the config, then stops the run (errors.oom, exit 2) when the plan's total is
-- above the capacity. path: the recipe file, for the message. Returns the plan or nil.
function M.check(recipe, device, path)
  M.check_config(recipe.model)
  local plan = require("trainer.plan")
  local ok, p = pcall(plan.estimate, recipe, { cuda_available = device ~= "cpu" })
  if not ok then
    if errors.is_user_error(p) then error(p, 0) end
    return nil
  end
  local cap, what = M.capacity(recipe, device)
  if not cap or p.total_bytes <= cap then return p end
  local fs = schema.format_size
  errors.oom(("%s: this run cannot fit: its memory plan predicts %s on %s, above %s; it stopped before "
    .. "allocating anything.\n%s\n`trainer plan %s KEY=VALUE ...` shows the ledger of any change before you run "
    .. "it."):format(path or "recipe", fs(p.total_bytes), device, what, plan.format(p, cap, path or "recipe"),
    path or "RECIPE.lua"))
end

return M
