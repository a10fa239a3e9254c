-- trainer.models.registry: which family file builds a model, by config.json's model_type.
--
--   local registry = require("trainer.models.registry")
--   local cfg, family = registry.config(raw, "models/x/config.json")   -- model_type chooses
--   local cfg, family = registry.config(preset, "model.config", "roberta")   -- model.arch chooses
--   registry.of_model(model)   -- the family of a model built by one (its config's model_type)
--   registry.model_types()     -- { "bert", "roberta", ... } in the order of the lines below
--
-- One line per model_type: the module of the family that builds it (a file of
-- lua/trainer/models/ behind the interface docs/ARCHITECTURE.md lists under "Adding a model").
-- Nothing outside lua/trainer/models/ names a family: run, plan, batch feed, checkpointing,
-- DDP and the CLI ask this registry. This file requires nothing at load time (recipe/keys.lua
-- reads model_types() inside `trainer check`'s sandbox); a family module loads on first use.
--
-- The choice: a folder's config.json names its model_type, which decides; a config made from a
-- preset or a table names none, and model.arch decides (its model_type becomes the arch). A
-- model_type that disagrees with an explicit model.arch is a user error naming both.
local errors = require("trainer.core.errors")

local M = {}

local lines = {
  { "bert", "trainer.models.bert" },
  { "roberta", "trainer.models.roberta" },
  { "xlm-roberta", "trainer.models.roberta" },
  { "camembert", "trainer.models.roberta" },   -- RoBERTa's shape and weights, a SentencePiece vocabulary
  { "distilbert", "trainer.models.distilbert" },
  { "mpnet", "trainer.models.mpnet" },
  { "modernbert", "trainer.models.modernbert" },
}

local module_of = {}
for _, l in ipairs(lines) do module_of[l[1]] = l[2] end

-- The model_type a config without one gets when nothing else chooses (transformers'
-- BertConfig is what a bare config.json of these fields has always meant here).
M.default = lines[1][1]

-- The model_types, in the registry's order.
function M.model_types()
  local out = {}
  for i, l in ipairs(lines) do out[i] = l[1] end
  return out
end

-- The family modules, each once, in the registry's order.
function M.families()
  local out, seen = {}, {}
  for _, l in ipairs(lines) do
    if not seen[l[2]] then seen[l[2]] = true; out[#out + 1] = require(l[2]) end
  end
  return out
end

-- The model_types one family builds.
function M.model_types_of(family)
  local out = {}
  for _, l in ipairs(lines) do if require(l[2]) == family then out[#out + 1] = l[1] end end
  return out
end

-- The module of the family that builds model_type, or nil.
function M.module_name(model_type) return module_of[model_type] end

local function supported() return table.concat(M.model_types(), ", ") end

-- The family of a model_type; an unknown one is a user error naming source (the file or key
-- it came from) and listing the supported ones.
function M.family(model_type, source)
  local name = module_of[model_type]
  if not name then
    errors.user("%s: model_type %s is not supported (%s)", source or "config",
      type(model_type) == "string" and ("%q"):format(model_type) or tostring(model_type), supported())
  end
  return require(name)
end

-- The model_type a raw config is built as: its own, else arch's, else the default. A
-- model_type of another family than an explicit arch's is a user error.
function M.model_type_of(raw, source, arch)
  local own = type(raw) == "table" and raw.model_type or nil
  if arch ~= nil then M.family(arch, "model.arch") end
  if own == nil or type(own) == "userdata" then return arch or M.default end
  local fam = M.family(own, source)
  if arch ~= nil and M.family(arch, "model.arch") ~= fam then
    errors.user("%s: model_type %q, but the recipe's model.arch is %q: the config decides the architecture of a model "
      .. "it describes; remove model.arch, or set it to %q", source, tostring(own), arch, tostring(own))
  end
  return own
end

-- The family that builds raw (a config.json table, a preset or model.config) and raw checked
-- by it (fields typed and ranged, defaults filled in; source names the file in errors).
-- arch: the recipe's model.arch, or nil.
function M.config(raw, source, arch)
  if type(raw) ~= "table" then errors.user("%s: a model config must be a JSON object", source or "config") end
  local model_type = M.model_type_of(raw, source, arch)
  local family = M.family(model_type, source)
  local copy = raw
  if raw.model_type ~= model_type then
    copy = {}
    for k, v in pairs(raw) do copy[k] = v end
    copy.model_type = model_type
  end
  return family.config(copy, source), family
end

-- The family of a checked config (its model_type).
function M.of_config(cfg)
  return M.family(cfg.model_type or M.default, "model config")
end

-- The family of a model a family built (its config's model_type), or nil for a module that
-- is not a model (a bare Linear, a test's own module).
function M.of_model(model)
  local cfg = type(model) == "table" and model.config or nil
  if type(cfg) ~= "table" or not module_of[cfg.model_type] then return nil end
  return require(module_of[cfg.model_type])
end

return M
