-- trainer.losses.matryoshka: MatryoshkaLoss (sentence-transformers 6.x) around an inner loss
-- (mnrl, cosent, cosine, or one of the distance losses: contrastive, online_contrastive,
-- triplet, batch_*_triplet):
--   loss = sum over dims d of weight_d * inner(normalize(e_1[:, :d]), normalize(e_2[:, :d]), ...)
-- with each embedding truncated to its first d dims and L2-normalised (sentence-transformers'
-- `shrink`; the cosine losses do not see the normalisation, the euclidean and manhattan ones do).
-- weights default to 1 each; dims are visited largest first, as there. Each dim has its own
-- inner loss object, so their saved states coexist between forward and backward.
-- Gradients: for every input, the truncated gradients go back through the normalisation and
-- are ACCUMULATED into its first d columns of one [B, C] f32 gradient.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")
local base = require("trainer.losses.base")
local deferred = require("trainer.train.deferred")

local Matryoshka = base.class()

local M = {}

-- make_inner(spec, opts) builds an inner loss (trainer.losses.new, passed in to avoid a
-- require cycle).
function M.new(spec, opts, make_inner)
  local dims, weights, inner = spec.dims, spec.weights, spec.inner
  local order = {}
  for i, d in ipairs(dims) do order[i] = { dim = d, weight = weights and weights[i] or 1 } end
  table.sort(order, function(x, y) return x.dim > y.dim end)
  local inner_spec = {}
  for k, v in pairs(spec) do inner_spec[k] = v end
  inner_spec.name, inner_spec.inner, inner_spec.dims, inner_spec.weights = inner, nil, nil, nil
  for _, o in ipairs(order) do o.loss = make_inner(inner_spec, opts) end
  return setmetatable({ kind = "matryoshka", inner = inner, levels = order }, Matryoshka)
end

function Matryoshka:forward(embs, labels)
  local B, width
  B, width, embs = base.check_embeddings("matryoshka", embs, 1)
  if self.levels[1].dim > width then
    errors.user("loss.dims: %d is larger than the embedding width %d; use sizes up to %d", self.levels[1].dim, width,
      width)
  end
  self:release()
  local value = 0
  -- the truncated, normalised embeddings the inner losses saved are this loss's (save)
  local ok, err = pcall(T.scope, function()
    local owned = {}
    for _, level in ipairs(self.levels) do
      local cut = {}
      for k, e in ipairs(embs) do
        local narrow = ops.narrow_cols(e, 0, level.dim, { dtype = "f32" })
        level["narrow" .. k] = narrow
        cut[k] = ops.l2norm(narrow)
        owned[#owned + 1], owned[#owned + 2] = narrow, cut[k]
      end
      value = deferred.add(value, deferred.mul(level.weight, level.loss:forward(cut, labels)))
    end
    self:save(owned, { embs = embs, B = B, width = width })
  end)
  if not ok then
    deferred.free(value)
    for _, level in ipairs(self.levels) do level.loss:release() end
    error(err, 0)
  end
  return value
end

function Matryoshka:backward()
  local s = self:saved()
  local grads = T.scope(function()
    local grads = {}
    for k = 1, #s.embs do grads[k] = T.zeros({ s.B, s.width }, { device = s.embs[k]:device() }) end
    for _, level in ipairs(self.levels) do
      for k, gk in ipairs(level.loss:backward()) do
        -- grads[k][:, :dim] += weight * d normalize(narrow) / d narrow
        T.scope(function()
          local dn = ops.l2norm_backward(gk, level["narrow" .. k])
          if level.weight ~= 1 then ops.scale_(dn, level.weight) end
          ops.copy_cols_(grads[k], 0, dn, 0, level.dim, true)
        end)
        gk:free()   -- each level's gradients one by one, as they are folded in
      end
    end
    return grads
  end)
  for _, level in ipairs(self.levels) do
    for k = 1, #s.embs do level["narrow" .. k] = nil end
  end
  self:release()
  return grads
end

function Matryoshka:release()
  for _, level in ipairs(self.levels or {}) do level.loss:release() end
  base.Loss.release(self)
end

return M
