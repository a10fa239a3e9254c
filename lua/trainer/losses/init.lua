-- trainer.losses: the training objectives, built from a recipe's `loss` table.
--
--   local losses = require("trainer.losses")
--   local loss = losses.new({ name = "mnrl", scale = 20 })
--   local value = loss:forward({ anchors, positives }, labels)   -- embeddings [B, C]
--   local grads = loss:backward()                                -- caller frees each
--
-- Names (sentence-transformers' classes they reproduce): mnrl (MultipleNegativesRankingLoss;
-- symmetric = true: MultipleNegativesSymmetricRankingLoss), cosent (CoSENTLoss), cosine
-- (CosineSimilarityLoss; score_scale divides the gold scores), softmax (SoftmaxLoss; needs
-- num_labels and opts.dim), cross_entropy (classification-head logits; label_smoothing),
-- matryoshka (MatryoshkaLoss over dims, weights, inner). The protocol every loss follows is
-- in trainer/losses/base.lua.
-- opts: dim (embedding width, for softmax), device (where owned weights live), seed,
-- deferred (forward returns a trainer.train.deferred value, read once per logged step).
local errors = require("trainer.core.errors")

local M = {}

local modules = {
  mnrl = "trainer.losses.mnrl",
  cosent = "trainer.losses.cosent",
  cosine = "trainer.losses.cosine",
  softmax = "trainer.losses.softmax",
  cross_entropy = "trainer.losses.cross_entropy",
  matryoshka = "trainer.losses.matryoshka",
}

-- Keys of a recipe's loss table (recipe_schema.lua) and the extra ones losses.new reads.
local known = {
  name = true, scale = true, symmetric = true, cached = true, mini_batch = true, dims = true, inner = true,
  num_labels = true, label_smoothing = true, score_scale = true, weights = true,
}

function M.names()
  local out = {}
  for name in pairs(modules) do out[#out + 1] = name end
  table.sort(out)
  return out
end

function M.new(spec, opts)
  spec = spec or {}
  if type(spec) == "string" then spec = { name = spec } end
  if type(spec) ~= "table" then errors.user("loss must be a table such as { name = \"mnrl\" }, got %s", type(spec)) end
  for k in pairs(spec) do
    if not known[k] then
      local list = {}
      for name in pairs(known) do list[#list + 1] = name end
      table.sort(list)
      errors.user("loss.%s is not a loss option; the options are %s", tostring(k), table.concat(list, ", "))
    end
  end
  local name = spec.name or "mnrl"
  local mod = modules[name]
  if not mod then
    errors.user("loss.name = %q is unknown; use one of %s", tostring(name), table.concat(M.names(), ", "))
  end
  local loss = require(mod).new(spec, opts or {}, M.new)
  -- opts.deferred (a run on a device): forward returns trainer.train.deferred values
  if opts and opts.deferred then loss.deferred = true end
  return loss
end

return M
