-- trainer.losses.bce: a cross-encoder's binary cross-entropy on scored pairs
-- (sentence-transformers' cross_encoder.losses.BinaryCrossEntropyLoss, torch's
-- BCEWithLogitsLoss): logits x [B, 1] (one score per (query, document) pair), gold y in [0, 1]
-- (1 relevant, 0 not, or a graded score), pos_weight p (1: plain BCE):
--   loss = mean_i ( (1 - y_i) x_i + (1 + (p - 1) y_i) softplus(-x_i) )
--   d loss / d x_i = ( (1 - y_i) - (1 + (p - 1) y_i) sigmoid(-x_i) ) / B
-- The B logits are read to the host and the loss and its gradient computed there in double:
-- one number per pair, so the read is the whole cost (it waits for the forward).
local errors = require("trainer.core.errors")
local base = require("trainer.losses.base")

local BCE = base.class()

local M = {}

-- spec.score_scale: the gold scores are divided by it (5 for 0-5 STS scores); spec.pos_weight.
function M.new(spec)
  return setmetatable({ kind = "bce", score_scale = spec and spec.score_scale or 1,
                        pos_weight = spec and spec.pos_weight or 1 }, BCE)
end

-- The one-column logits of a cross-encoder as a Lua array of B numbers.
function M.scores(kind, embs)
  local B, K
  B, K, embs = base.check_embeddings(kind, embs, 1, 1)
  if K ~= 1 then
    errors.user("%s loss: the model gives %d logits per pair; a cross-encoder gives one (model.task = "
      .. "\"cross_encoder\", or model.num_labels = 1)", kind, K)
  end
  return embs[1]:values(), B, embs[1]
end

local function sigmoid(x)
  if x >= 0 then return 1 / (1 + math.exp(-x)) end
  local e = math.exp(x)
  return e / (1 + e)
end
M.sigmoid = sigmoid

function BCE:forward(embs, labels)
  local x, B, logits = M.scores("bce", embs)
  local y = base.host_labels("bce", labels, B)
  local sum, d = 0, {}
  local scaled = {}
  for i = 1, B do scaled[i] = y[i] / self.score_scale end
  y = scaled
  for i = 1, B do
    if y[i] < 0 or y[i] > 1 then
      errors.user_row(i, "bce loss: label %s is not in [0, 1] (1 relevant, 0 not, or a score between) after "
        .. "loss.score_scale = %s; set loss.score_scale (5 for 0-5 scores) or map the labels with data.label_map",
        tostring(y[i] * self.score_scale), tostring(self.score_scale))
    end
    local v, w = x[i], 1 + (self.pos_weight - 1) * y[i]
    local softplus_neg = math.max(-v, 0) + math.log(1 + math.exp(-math.abs(v)))   -- log(1 + exp(-v))
    sum = sum + (1 - y[i]) * v + w * softplus_neg
    d[i] = { ((1 - y[i]) - w * sigmoid(-v)) / B }
  end
  return base.save_host_grad(self, d, logits:device(), sum / B)
end

BCE.backward = base.host_grad_backward

return M
