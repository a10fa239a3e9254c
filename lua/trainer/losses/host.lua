-- trainer.losses.host: the losses over distances (contrastive, online_contrastive, triplet,
-- batch_*_triplet) computed on the host in double. Their work is O(B^2 C) at most, small next
-- to the encoder, and made of selections (hardest positive, semi-hard negative, margins)
-- that need the values anyway; so forward reads the embeddings once, computes the loss and
-- d loss / d embeddings in double, and backward uploads the gradients to the embeddings'
-- device. A loss defines compute(self, rows, labels) -> loss, grads (Lua arrays [B][C], one
-- per input) and gets forward/backward from here.
--
-- Distances follow sentence-transformers exactly, eps included:
--   pair metrics (ContrastiveLoss's SiameseDistanceMetric with eps = 1e-6, TripletLoss's
--   TripletDistanceMetric with eps = 0): euclidean ||x - y + eps||, manhattan |x - y + eps|_1,
--   cosine 1 - cos(x, y);
--   batch metrics (BatchHardTripletLossDistanceFunction): euclidean sqrt(max(0, |x_i|^2 +
--   |x_j|^2 - 2 x_i.x_j)) with 0 (and no gradient) where that is 0, cosine max(0, 1 - cos)
--   with a zero diagonal.
local T = require("trainer.core.tensor")
local base = require("trainer.losses.base")

local M = {}

local sqrt, abs = math.sqrt, math.abs

-- The rows of e [B, C] as Lua arrays.
function M.rows(e)
  local v, s = e:values(), e:shape()
  local B, C = s[1], s[2]
  local out = {}
  for i = 1, B do
    local r, o = {}, (i - 1) * C
    for c = 1, C do r[c] = v[o + c] end
    out[i] = r
  end
  return out
end

function M.zeros(B, C)
  local out = {}
  for i = 1, B do
    local r = {}
    for c = 1, C do r[c] = 0 end
    out[i] = r
  end
  return out
end

-- The dot product of two Lua arrays of the same length.
function M.dot(x, y)
  local s = 0
  for c = 1, #x do s = s + x[c] * y[c] end
  return s
end
local dot = M.dot

local function norm(x) return sqrt(dot(x, x)) end

-- ---------------------------------------------------------------- pair metrics
-- distance(x, y, eps) and back(x, y, d, g, gx, gy): adds g * d distance / d (x, y).
M.pair = {
  euclidean = {
    distance = function(x, y, eps)
      local s = 0
      for c = 1, #x do
        local t = x[c] - y[c] + eps
        s = s + t * t
      end
      return sqrt(s)
    end,
    back = function(x, y, d, g, gx, gy, eps)
      if d == 0 or g == 0 then return end
      for c = 1, #x do
        local v = g * (x[c] - y[c] + eps) / d
        gx[c], gy[c] = gx[c] + v, gy[c] - v
      end
    end,
  },
  manhattan = {
    distance = function(x, y, eps)
      local s = 0
      for c = 1, #x do s = s + abs(x[c] - y[c] + eps) end
      return s
    end,
    back = function(x, y, _, g, gx, gy, eps)
      if g == 0 then return end
      for c = 1, #x do
        local t = x[c] - y[c] + eps
        local v = t > 0 and g or (t < 0 and -g or 0)
        gx[c], gy[c] = gx[c] + v, gy[c] - v
      end
    end,
  },
  cosine = {
    distance = function(x, y)
      return 1 - dot(x, y) / (math.max(norm(x), 1e-12) * math.max(norm(y), 1e-12))
    end,
    back = function(x, y, d, g, gx, gy)
      if g == 0 then return end
      local nx, ny = math.max(norm(x), 1e-12), math.max(norm(y), 1e-12)
      local cos = 1 - d
      -- d cos / d x = y / (nx ny) - cos x / nx^2; the distance is 1 - cos
      for c = 1, #x do
        gx[c] = gx[c] - g * (y[c] / (nx * ny) - cos * x[c] / (nx * nx))
        gy[c] = gy[c] - g * (x[c] / (nx * ny) - cos * y[c] / (ny * ny))
      end
    end,
  },
}

-- ---------------------------------------------------------------- batch metrics
-- matrix(E) -> D [B][B] (and state for back); back(E, D, gD, gE, state) adds gD through D.
M.batch = {
  euclidean = {
    matrix = function(E)
      local B, sq = #E, {}
      for i = 1, B do sq[i] = dot(E[i], E[i]) end
      local D = {}
      for i = 1, B do
        local r = {}
        for j = 1, B do
          local s = i == j and 0 or sq[i] - 2 * dot(E[i], E[j]) + sq[j]
          r[j] = s > 0 and sqrt(s) or 0
        end
        D[i] = r
      end
      return D
    end,
    back = function(E, D, gD, gE)
      local B, C = #E, #E[1]
      for i = 1, B do
        for j = 1, B do
          local g, d = gD[i][j], D[i][j]
          if g ~= 0 and d > 0 and i ~= j then
            -- d sqrt(s) / d s = 1 / (2 d); d s / d x_i = 2 (x_i - x_j)
            local k = g / d
            local xi, xj, gi, gj = E[i], E[j], gE[i], gE[j]
            for c = 1, C do
              local v = k * (xi[c] - xj[c])
              gi[c], gj[c] = gi[c] + v, gj[c] - v
            end
          end
        end
      end
    end,
  },
  cosine = {
    matrix = function(E)
      local B, n = #E, {}
      for i = 1, B do n[i] = math.max(norm(E[i]), 1e-12) end
      local D = {}
      for i = 1, B do
        local r = {}
        for j = 1, B do
          r[j] = i == j and 0 or math.max(1 - dot(E[i], E[j]) / (n[i] * n[j]), 0)
        end
        D[i] = r
      end
      return D, n
    end,
    back = function(E, D, gD, gE)
      local B, C = #E, #E[1]
      local n = {}
      for i = 1, B do n[i] = math.max(norm(E[i]), 1e-12) end
      for i = 1, B do
        for j = 1, B do
          local g = gD[i][j]
          if g ~= 0 and i ~= j and 1 - dot(E[i], E[j]) / (n[i] * n[j]) >= 0 then
            local cos = 1 - D[i][j]
            local xi, xj, gi, gj = E[i], E[j], gE[i], gE[j]
            local ni, nj = n[i], n[j]
            for c = 1, C do
              gi[c] = gi[c] - g * (xj[c] / (ni * nj) - cos * xi[c] / (ni * ni))
              gj[c] = gj[c] - g * (xi[c] / (ni * nj) - cos * xj[c] / (nj * nj))
            end
          end
        end
      end
    end,
  },
}

-- ---------------------------------------------------------------- the protocol
-- A loss class whose forward runs compute(self, rows, labels) (rows: one [B][C] Lua array
-- per embeddings input) and whose backward uploads the gradients it returned.
function M.class(min_inputs, max_inputs, needs_labels)
  local cls = base.class()
  function cls:forward(embs, labels)
    local B
    local _
    B, _, embs = base.check_embeddings(self.kind, embs, min_inputs, max_inputs)
    if needs_labels then labels = base.host_labels(self.kind, labels, B) end
    local rows = {}
    for i, e in ipairs(embs) do rows[i] = M.rows(e) end
    local loss, grads = self:compute(rows, labels)
    self:save({}, { grads = grads, embs = embs })
    return loss
  end
  function cls:backward()
    local s = self:saved()
    local out = {}
    for i, g in ipairs(s.grads) do out[i] = T.from_table(g, { device = s.embs[i]:device() }) end
    self:release()
    return out
  end
  return cls
end

return M
