-- trainer.losses.softmax: SoftmaxLoss (sentence-transformers) for labelled pairs (NLI):
--   features = [u, v, |u - v|]  [B, 3C]
--   logits   = features classifier.weight^T + classifier.bias   [B, num_labels]
--   loss     = mean cross-entropy against the integer labels
-- The classifier belongs to the loss: parameters() yields "classifier.weight" [num_labels,
-- 3C] and "classifier.bias" [num_labels] (f32, tag weights; gradients tag grads that
-- ACCUMULATE), initialised as torch.nn.Linear (uniform in +-1/sqrt(3C)) from opts.seed.
local T = require("trainer.core.tensor")
local sites = require("trainer.core.rng_sites")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")
local base = require("trainer.losses.base")

local Softmax = base.class()

local M = {}

-- opts.dim: the embedding width C (required); opts.device, opts.seed.
function M.new(spec, opts)
  opts = opts or {}
  local K, dim = spec.num_labels, opts.dim
  if type(dim) ~= "number" or dim < 1 then
    errors.user("softmax loss: the embedding width is unknown (opts.dim = %s); pass the model's hidden size",
      tostring(dim))
  end
  local bound = 1 / math.sqrt(3 * dim)
  local seed = opts.seed or 0
  local function init(shape, stream) -- torch.nn.Linear's U(-bound, bound), one stream each
    return T.random(shape, { dist = "uniform", bound = bound, seed = seed, stream = stream, device = opts.device,
      tag = "weights" }, "softmax loss init")
  end
  local w = { value = init({ K, 3 * dim }, sites.softmax_weight), trainable = true,
              grad = T.zeros({ K, 3 * dim }, { device = opts.device, tag = "grads" }) }
  local b = { value = init({ K }, sites.softmax_bias), trainable = true,
              grad = T.zeros({ K }, { device = opts.device, tag = "grads" }) }
  return setmetatable({ kind = "softmax", num_labels = K, dim = dim,
                        _params = { { "classifier.weight", w }, { "classifier.bias", b } } }, Softmax)
end

function Softmax:forward(embs, labels)
  local B, width
  B, width, embs = base.check_embeddings("softmax", embs, 2, 2)
  if width ~= self.dim then
    errors.user("softmax loss: embeddings have width %d but the classifier was built for %d", width, self.dim)
  end
  local y = base.host_labels("softmax", labels, B)
  for i = 1, B do
    if y[i] < 0 or y[i] >= self.num_labels or y[i] ~= math.floor(y[i]) then
      errors.user_row(i, "softmax loss: label %s is not a class id 0..%d (loss.num_labels = %d); fix the label, map "
        .. "it with data.label_map, or raise loss.num_labels", tostring(y[i]), self.num_labels - 1, self.num_labels)
    end
  end
  local u, v = embs[1], embs[2]
  local w, b = self._params[1][2], self._params[2][2]
  T.scope(function()
    local o = {}
    o.diff = ops.abs_diff(u, v)
    o.features = ops.cat_cols({ u, v, o.diff }, { dtype = "f32" })
    o.logits = ops.linear(o.features, w.value, b.value)
    o.targets = self:targets(y, u:device())
    o.loss, o.lse = ops.cross_entropy(o.logits, o.targets)
    self:save(o, { u = u, v = v, w = w, b = b })
  end)
  return self:value_of(self._owned.loss)
end

function Softmax:backward()
  local s, o = self:saved(), self._owned
  local D = self.dim
  local grads = T.scope(function()
    local dfeat = T.scope(function()
      return ops.linear_backward(ops.cross_entropy_backward(o.logits, o.lse, o.targets, 1), o.features, s.w.value,
        s.w.grad, s.b.grad)
    end)
    -- d features = [du, dv, d|u - v|]
    local du, dv, dd = T.scope(function()
      return ops.narrow_cols(dfeat, 0, D), ops.narrow_cols(dfeat, D, D), ops.narrow_cols(dfeat, 2 * D, D)
    end)
    dfeat:free()   -- before abs_diff_backward's outputs: the peak stays that of one of them
    local dau, dav = ops.abs_diff_backward(dd, s.u, s.v)
    ops.add_(du, dau)
    ops.add_(dv, dav)
    return { du, dv }
  end)
  self:release()
  return grads
end

return M
