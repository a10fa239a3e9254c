-- trainer.losses.cross_entropy: the sequence-classification head's loss: mean cross-entropy
-- of logits [B, K] (the head's output, the one "embeddings" input) against integer labels,
-- with optional label_smoothing (torch.nn.functional.cross_entropy).
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")
local base = require("trainer.losses.base")

local CE = base.class()

local M = {}

function M.new(spec)
  return setmetatable({ kind = "cross_entropy", label_smoothing = spec.label_smoothing }, CE)
end

function CE:forward(embs, labels)
  local B, K
  B, K, embs = base.check_embeddings("cross_entropy", embs, 1, 1)
  local y = base.host_labels("cross_entropy", labels, B)
  for i = 1, B do
    if (y[i] < 0 or y[i] >= K or y[i] ~= math.floor(y[i])) and y[i] ~= -100 then
      errors.user_row(i, "cross_entropy loss: label %s is not a class id 0..%d (the classifier has %d labels); fix "
        .. "the label, map it with data.label_map, or set model.num_labels", tostring(y[i]), K - 1, K)
    end
  end
  local logits = embs[1]
  T.scope(function()
    local o = { targets = self:targets(y, logits:device()) }
    o.loss, o.lse = ops.cross_entropy(logits, o.targets, { label_smoothing = self.label_smoothing })
    self:save(o, { logits = logits })
  end)
  return self:value_of(self._owned.loss)
end

function CE:backward()
  local s, o = self:saved(), self._owned
  local d = ops.cross_entropy_backward(s.logits, o.lse, o.targets, 1, { label_smoothing = self.label_smoothing })
  self:release()
  return { d }
end

return M
