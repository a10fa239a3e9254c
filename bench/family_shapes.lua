-- bench/family_shapes.lua: the config.json table of a model family for bench/train_step.lua's
-- shape flags, from bench/families.json (which bench/torch_train_step.py reads too, so that both
-- sides build the same model).
--   local shapes = dofile(root .. "/bench/family_shapes.lua")
--   shapes.config("mpnet", { hidden = 384, layers = 6, heads = 12, intermediate = 1536, seq = 128 })
--   shapes.lora_targets("mpnet")   -- { "q", "v" }
local json = require("trainer.core.json")
local root = require("trainer.native").root()

local M = {}
local families = json.read(root .. "/bench/families.json")

local function family(name)
  local f = families[name]
  if type(f) ~= "table" or name:sub(1, 1) == "_" then
    local names = {}
    for k in pairs(families) do if k:sub(1, 1) ~= "_" then names[#names + 1] = k end end
    table.sort(names)
    error(("bench: --family %s is not in bench/families.json (%s)"):format(name, table.concat(names, ", ")), 0)
  end
  return f
end

-- The config.json table of family `name` for opt's hidden, layers, heads, intermediate and seq.
function M.config(name, opt)
  local f = family(name)
  local raw = { model_type = f.model_type, vocab_size = f.vocab_size }
  for k, v in pairs(f.config) do raw[k] = v end
  for flag, field in pairs(f.shape) do
    raw[field] = flag == "positions" and math.max(512, opt.seq) or opt[flag]
  end
  return raw
end

function M.vocab_size(name) return family(name).vocab_size end

function M.lora_targets(name)
  local out = {}
  for i, t in ipairs(family(name).lora_targets) do out[i] = t end
  return out
end

return M
