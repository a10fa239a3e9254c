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
-- matryoshka (MatryoshkaLoss over dims, weights, inner), contrastive (ContrastiveLoss),
-- online_contrastive (OnlineContrastiveLoss), triplet (TripletLoss), batch_hard_triplet,
-- batch_semi_hard_triplet, batch_all_triplet (Batch*TripletLoss; margin, distance), mse
-- (MSELoss) and margin_mse (MarginMSELoss): distillation from a teacher's embeddings or
-- margins in the labels, or from loss.teacher (a model folder), angle (AnglELoss: CoSENT over
-- the angle similarity; scale), gist (GISTEmbedLoss: MNRL with a guide's false-negative
-- filter; the guide's embeddings in the labels or loss.teacher); for cross-encoders (one logit
-- per text pair): bce (BinaryCrossEntropyLoss) and, with opts.cross_encoder, cross_entropy is
-- the listwise loss over each query's positive and negatives (trainer.losses.listwise). The
-- protocol every loss follows is in trainer/losses/base.lua.
-- opts: dim (embedding width, for softmax), device (where owned weights live), seed,
-- deferred (forward returns a trainer.train.deferred value, read once per logged step),
-- cross_encoder (the model scores text pairs: cross_entropy is the listwise loss).
local M = {}

local modules = {
  mnrl = "trainer.losses.mnrl",
  cosent = "trainer.losses.cosent",
  cosine = "trainer.losses.cosine",
  softmax = "trainer.losses.softmax",
  cross_entropy = "trainer.losses.cross_entropy",
  matryoshka = "trainer.losses.matryoshka",
  contrastive = "trainer.losses.pair",
  online_contrastive = "trainer.losses.pair",
  triplet = "trainer.losses.pair",
  batch_hard_triplet = "trainer.losses.batch_triplet",
  batch_semi_hard_triplet = "trainer.losses.batch_triplet",
  batch_all_triplet = "trainer.losses.batch_triplet",
  mse = "trainer.losses.distill",
  margin_mse = "trainer.losses.distill",
  angle = "trainer.losses.angle",
  gist = "trainer.losses.gist",
  adaptive_layer = "trainer.losses.adaptive_layer",
  bce = "trainer.losses.bce",
}

function M.names()
  local out = {}
  for name in pairs(modules) do out[#out + 1] = name end
  table.sort(out)
  return out
end

-- spec: a recipe's loss table, resolved here by the recipe schema (trainer.recipe.keys: the
-- checks and defaults of every loss key), so each loss reads complete, checked values.
function M.new(spec, opts)
  if type(spec) == "string" then spec = { name = spec } end
  spec = require("trainer.recipe.keys").resolve("loss", spec or {})
  local module = modules[spec.name]
  if spec.name == "cross_entropy" and opts and opts.cross_encoder then module = "trainer.losses.listwise" end
  local loss = require(module).new(spec, opts or {}, M.new)
  -- opts.deferred (a run on a device): forward returns trainer.train.deferred values
  if opts and opts.deferred then loss.deferred = true end
  return loss
end

return M
