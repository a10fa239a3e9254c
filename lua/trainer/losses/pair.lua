-- trainer.losses.pair: sentence-transformers' losses over the distance of two or three
-- columns, row by row (computed on the host in double: trainer.losses.host).
--   contrastive (ContrastiveLoss): pairs (x_i, y_i) with labels l_i in {0, 1}, d_i their
--     distance: loss = mean of 0.5 (l d^2 + (1 - l) relu(margin - d)^2). Defaults: distance
--     "cosine" (1 - cos), margin 0.5.
--   online_contrastive (OnlineContrastiveLoss): only the hard pairs of the batch: negatives
--     (l = 0) closer than the farthest positive, positives (l = 1) farther than the closest
--     negative (with no pair of the other kind, the mean of the own kind is the bound);
--     loss = sum of d^2 over those positives + sum of relu(margin - d)^2 over those negatives.
--     Defaults: distance "cosine", margin 0.5.
--   triplet (TripletLoss): columns (anchor, positive, negative): loss = mean of
--     relu(d(a, p) - d(a, n) + margin). Defaults: distance "euclidean", margin 5.
-- Distances: euclidean, manhattan, cosine, as there (trainer.losses.host).
local host = require("trainer.losses.host")

local M = {}

local DEFAULTS = {
  contrastive = { distance = "cosine", margin = 0.5, eps = 1e-6, inputs = 2 },
  online_contrastive = { distance = "cosine", margin = 0.5, eps = 1e-6, inputs = 2 },
  triplet = { distance = "euclidean", margin = 5, eps = 0, inputs = 3 },
}

local Pair = {}

-- distances of rows a[i], b[i]
local function distances(metric, a, b, eps)
  local d = {}
  for i = 1, #a do d[i] = metric.distance(a[i], b[i], eps) end
  return d
end

local function contrastive(self, rows, labels)
  local a, b = rows[1], rows[2]
  local B, C = #a, #a[1]
  local d = distances(self.metric, a, b, self.eps)
  local ga, gb = host.zeros(B, C), host.zeros(B, C)
  local loss, m = 0, self.margin
  for i = 1, B do
    local l, r = labels[i], math.max(m - d[i], 0)
    loss = loss + 0.5 * (l * d[i] * d[i] + (1 - l) * r * r)
    -- d loss_i / d d_i = l d - (1 - l) relu(margin - d)
    self.metric.back(a[i], b[i], d[i], (l * d[i] - (1 - l) * r) / B, ga[i], gb[i], self.eps)
  end
  return loss / B, { ga, gb }
end

local function online_contrastive(self, rows, labels)
  local a, b = rows[1], rows[2]
  local B, C = #a, #a[1]
  local d = distances(self.metric, a, b, self.eps)
  local pos_max, neg_min, pos_sum, neg_sum, npos, nneg = -math.huge, math.huge, 0, 0, 0, 0
  for i = 1, B do
    if labels[i] == 1 then
      pos_max, pos_sum, npos = math.max(pos_max, d[i]), pos_sum + d[i], npos + 1
    elseif labels[i] == 0 then
      neg_min, neg_sum, nneg = math.min(neg_min, d[i]), neg_sum + d[i], nneg + 1
    end
  end
  local neg_bound = npos > 0 and pos_max or neg_sum / math.max(nneg, 1)
  local pos_bound = nneg > 0 and neg_min or pos_sum / math.max(npos, 1)
  local ga, gb = host.zeros(B, C), host.zeros(B, C)
  local loss, m = 0, self.margin
  for i = 1, B do
    local g = 0
    if labels[i] == 1 and d[i] > pos_bound then
      loss, g = loss + d[i] * d[i], 2 * d[i]
    elseif labels[i] == 0 and d[i] < neg_bound then
      local r = math.max(m - d[i], 0)
      loss, g = loss + r * r, -2 * r
    end
    self.metric.back(a[i], b[i], d[i], g, ga[i], gb[i], self.eps)
  end
  return loss, { ga, gb }
end

local function triplet(self, rows)
  local a, p, n = rows[1], rows[2], rows[3]
  local B, C = #a, #a[1]
  local ga, gp, gn, ga2 = host.zeros(B, C), host.zeros(B, C), host.zeros(B, C), host.zeros(B, C)
  local loss = 0
  for i = 1, B do
    local dp = self.metric.distance(a[i], p[i], self.eps)
    local dn = self.metric.distance(a[i], n[i], self.eps)
    local t = dp - dn + self.margin
    if t > 0 then
      loss = loss + t
      self.metric.back(a[i], p[i], dp, 1 / B, ga[i], gp[i], self.eps)
      self.metric.back(a[i], n[i], dn, -1 / B, ga2[i], gn[i], self.eps)
    end
  end
  for i = 1, B do
    for c = 1, C do ga[i][c] = ga[i][c] + ga2[i][c] end
  end
  return loss / B, { ga, gp, gn }
end

local compute = { contrastive = contrastive, online_contrastive = online_contrastive, triplet = triplet }

function M.new(spec)
  local name = spec.name
  local def = DEFAULTS[name]
  local cls = Pair[name]
  if not cls then
    cls = host.class(def.inputs, def.inputs, name ~= "triplet")
    cls.compute = compute[name]
    Pair[name] = cls
  end
  local distance = spec.distance or def.distance
  return setmetatable({ kind = name, metric = host.pair[distance], distance = distance,
    margin = spec.margin or def.margin, eps = def.eps }, cls)
end

return M
