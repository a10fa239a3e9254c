-- trainer.losses.angle: AnglELoss (sentence-transformers): CoSENT over the angle similarity
-- of each pair instead of its cosine:
--   sim(x, y) = |cos(x, y) + sum_k (x2_k y1_k - x1_k y2_k)|   (x, y L2-normalised and cut
--   into halves x1, x2; an odd width gets one zero appended first)
--   loss = log(1 + sum over pairs (i, j) with y_i > y_j of exp(scale (sim_j - sim_i)))
-- Columns: (x, y) pairs with gold scores; or (anchor, positive, negative_1..n), each
-- (anchor, candidate) a pair scored by the label (1 when no labels) for the positive and
-- 1 - label for the negatives, as there. Scale 20 by default (loss.scale). Computed on the
-- host in double (trainer.losses.host); CoSENT's sum is trainer.losses.cosent's.
local host = require("trainer.losses.host")
local cosent = require("trainer.losses.cosent")
local base = require("trainer.losses.base")

local M = {}

local function normalized(x, C2)
  local n = 0
  for c = 1, #x do n = n + x[c] * x[c] end
  n = math.max(math.sqrt(n), 1e-12)
  local u = {}
  for c = 1, C2 do u[c] = (x[c] or 0) / n end
  return u, n
end

-- sim(x, y) and a function adding g * d sim / d (x, y) into gx, gy
local function angle(x, y)
  local C = #x
  local C2 = C + C % 2
  local h = C2 / 2
  local nx, lx = normalized(x, C2)
  local ny, ly = normalized(y, C2)
  local z = 0
  for c = 1, C2 do z = z + nx[c] * ny[c] end
  for k = 1, h do z = z + nx[h + k] * ny[k] - nx[k] * ny[h + k] end
  local sign = z > 0 and 1 or (z < 0 and -1 or 0)
  local function back(g, gx, gy)
    g = g * sign
    if g == 0 then return end
    -- d z / d nx and d z / d ny
    local ux, uy = {}, {}
    for c = 1, C2 do ux[c], uy[c] = ny[c], nx[c] end
    for k = 1, h do
      ux[h + k], ux[k] = ux[h + k] + ny[k], ux[k] - ny[h + k]
      uy[k], uy[h + k] = uy[k] + nx[h + k], uy[h + k] - nx[k]
    end
    -- through the normalisation: d n / d x = (I - n n^T) / |x|
    local px, py = 0, 0
    for c = 1, C2 do px, py = px + ux[c] * nx[c], py + uy[c] * ny[c] end
    for c = 1, C do
      gx[c] = gx[c] + g * (ux[c] - px * nx[c]) / lx
      gy[c] = gy[c] + g * (uy[c] - py * ny[c]) / ly
    end
  end
  return math.abs(z), back
end

local function compute(self, rows, labels)
  local B, C = #rows[1], #rows[1][1]
  local pairs_, y = {}, {}
  if #rows == 2 then
    if labels == nil then base.host_labels("angle", labels, B) end   -- raises: pairs need scores
    for i = 1, B do pairs_[i], y[i] = { 1, i, 2 }, labels[i] end
  else
    for i = 1, B do pairs_[i], y[i] = { 1, i, 2 }, labels and labels[i] or 1 end
    for k = 3, #rows do
      for i = 1, B do pairs_[#pairs_ + 1], y[#y + 1] = { 1, i, k }, 1 - (labels and labels[i] or 1) end
    end
  end
  local sims, backs = {}, {}
  for p, pr in ipairs(pairs_) do sims[p], backs[p] = angle(rows[pr[1]][pr[2]], rows[pr[3]][pr[2]]) end
  local loss, dsim = cosent.host_loss(self.scale, sims, y)
  local grads = {}
  for k = 1, #rows do grads[k] = host.zeros(B, C) end
  for p, pr in ipairs(pairs_) do backs[p](dsim[p], grads[pr[1]][pr[2]], grads[pr[3]][pr[2]]) end
  return loss, grads
end

local cls

function M.new(spec)
  if not cls then
    cls = host.class(2, nil, false)
    cls.compute = compute
    -- labels: scores for pairs (required), optional 0/1 for triplets
    local forward = cls.forward
    function cls:forward(embs, labels)
      if labels ~= nil then
        local n = (base.check_embeddings("angle", embs, 2))
        labels = base.host_labels("angle", labels, n)
      end
      return forward(self, embs, labels)
    end
  end
  return setmetatable({ kind = "angle", scale = spec.scale }, cls)
end

return M
