-- trainer.losses.mnrl: MultipleNegativesRankingLoss (sentence-transformers), in-batch
-- negatives with optional hard negatives and an optional symmetric direction.
--
-- Inputs: anchors a [B, C], positives p [B, C], then any number of hard-negative columns
-- n_k [B, C]. scores = scale * cos(a, [p; n_1; ...; n_k]) is [B, (k+1) B]; the loss is the
-- cross-entropy of each row against its own positive (labels arange(B)), averaged over rows.
-- symmetric = true adds the positives -> anchors direction over cos(p, a) [B, B] and
-- averages the two (MultipleNegativesSymmetricRankingLoss, i.e. directions query_to_doc +
-- doc_to_query with per-direction partitions). Labels are ignored.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local base = require("trainer.losses.base")
local deferred = require("trainer.train.deferred")

local MNRL = base.class()

local M = {}

function M.new(spec)
  return setmetatable({ kind = "mnrl", scale = spec.scale, symmetric = spec.symmetric,
    mini_batch = spec.mini_batch }, MNRL)
end

function MNRL:forward(embs, labels)
  local B
  local _
  B, _, embs = base.check_embeddings("mnrl", embs, 2)
  local a, docs = embs[1], {}
  for i = 2, #embs do docs[#docs + 1] = embs[i] end
  T.scope(function()
    local o = {}
    local cand, new_cand = base.cat_rows(docs)
    if new_cand then o.cand = cand end
    -- arange(B): fed with the batch on a device (losses.base targets), else made here
    o.targets = self.fed_targets and self:targets() or T.arange(B, { dtype = "i64", device = a:device() })
    o.logits = ops.scale_(ops.cosine_sim(a, cand), self.scale)
    o.loss, o.lse = ops.cross_entropy(o.logits, o.targets)
    if self.symmetric then
      o.logits2 = ops.scale_(ops.cosine_sim(docs[1], a), self.scale)
      o.loss2, o.lse2 = ops.cross_entropy(o.logits2, o.targets)
    end
    self:save(o, { a = a, docs = docs, cand = cand, B = B })
  end)
  local o = self._owned
  local value = self:value_of(o.loss)
  if self.symmetric then value = deferred.mul(0.5, deferred.add(value, self:value_of(o.loss2))) end
  return value
end

function MNRL:backward()
  local s, o = self:saved(), self._owned
  local w = self.symmetric and 0.5 or 1
  -- d loss / d (a, cand) through the scaled cosine logits of one direction (its weight w)
  local function direction(logits, lse, wd, x, y)
    return T.scope(function()
      return ops.cosine_sim_backward(ops.scale_(ops.cross_entropy_backward(logits, lse, o.targets, wd), self.scale), x, y)
    end)
  end
  local grads = T.scope(function()
    local da, dcand = direction(o.logits, o.lse, w, s.a, s.cand)
    local grads = { da }
    if #s.docs == 1 then
      grads[2] = dcand
    else
      for i, g in ipairs(base.split_rows(dcand, s.B, #s.docs)) do grads[i + 1] = g end
    end
    if self.symmetric then
      local dp2, da2 = direction(o.logits2, o.lse2, 0.5, s.docs[1], s.a)
      ops.add_(da, da2)
      ops.add_(grads[2], dp2)
    end
    return grads
  end)
  self:release()
  return grads
end

return M
