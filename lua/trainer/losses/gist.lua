-- trainer.losses.gist: GISTEmbedLoss (sentence-transformers): MNRL whose in-batch negatives
-- are filtered by a guide model. Columns (anchor, positive[, negative]); with the guide's
-- embeddings g of the same texts (per row, one vector per column: the labels, or from
-- loss.teacher, a model folder, per batch) and cos the cosine:
--   scores_i = [cos(a_i, p_j) for j] ++ [cos(a_i, a_j)] ++ [cos(p_i, p_j)] ++ [cos(a_i, n_j)]
--   (anchor-anchor with contrast_anchors, positive-positive with contrast_positives, the
--   negatives when given), divided by temperature (default 0.01); a candidate whose guide
--   similarity to the anchor's row exceeds the guide's anchor-positive similarity
--   g(a_i).g(p_i) (less margin: absolute, or relative |.| * margin) is masked out as a false
--   negative, and so is a row's own text in the anchor-anchor and positive-positive blocks;
--   the positive p_i itself never is. loss = mean over rows of cross-entropy(scores_i, i).
-- Computed on the host in double (trainer.losses.host).
local host = require("trainer.losses.host")
local errors = require("trainer.core.errors")
local distill = require("trainer.losses.distill")

local M = {}

local function norm(x)
  local s = 0
  for c = 1, #x do s = s + x[c] * x[c] end
  return math.sqrt(s)
end

local function cos(x, y, nx, ny)
  local s = 0
  for c = 1, #x do s = s + x[c] * y[c] end
  return s / math.max(nx * ny, 1e-8)
end

local function compute(self, rows, labels)
  local ncols, B, C = #rows, #rows[1], #rows[1][1]
  if ncols > 3 then errors.user("gist: expects 2 or 3 text columns (anchor, positive[, negative]), got %d", ncols) end
  if type(labels) ~= "table" or #labels ~= B then
    errors.user("gist: expects %d labels (the guide's embeddings of each column, one entry per row), got %s", B,
      type(labels) == "table" and tostring(#labels) or type(labels))
  end
  local guide = {}
  for k = 1, ncols do guide[k] = {} end
  for i = 1, B do
    local l = labels[i]
    if type(l) ~= "table" or #l ~= ncols then
      errors.user("gist: label %d must hold the guide's embedding of each of the %d text columns", i, ncols)
    end
    for k = 1, ncols do
      if not distill.is_vector(l[k]) then
        errors.user("gist: label %d: the guide embedding of column %d is not a list of numbers", i, k)
      end
      guide[k][i] = l[k]
    end
  end
  local norms, gnorms = {}, {}
  for k = 1, ncols do
    norms[k], gnorms[k] = {}, {}
    for i = 1, B do norms[k][i], gnorms[k][i] = norm(rows[k][i]), norm(guide[k][i]) end
  end
  -- blocks: { x column, y column, no self }
  local blocks = { { 1, 2, false } }
  if self.contrast_anchors then blocks[#blocks + 1] = { 1, 1, true } end
  if self.contrast_positives then blocks[#blocks + 1] = { 2, 2, true } end
  if ncols == 3 then blocks[#blocks + 1] = { 1, 3, false } end
  local grads = {}
  for k = 1, ncols do grads[k] = host.zeros(B, C) end
  local t, loss = self.temperature, 0
  for i = 1, B do
    local gpos = cos(guide[1][i], guide[2][i], gnorms[1][i], gnorms[2][i])
    local bound = self.margin_strategy == "relative" and gpos - math.abs(gpos) * self.margin or gpos - self.margin
    local entries, m = {}, -math.huge
    for bi, blk in ipairs(blocks) do
      local xk, yk, noself = blk[1], blk[2], blk[3]
      for j = 1, B do
        local keep = true
        local is_target = bi == 1 and j == i
        if not is_target then
          if noself and j == i then keep = false
          elseif cos(guide[xk][i], guide[yk][j], gnorms[xk][i], gnorms[yk][j]) > bound then keep = false end
        end
        if keep then
          local c = cos(rows[xk][i], rows[yk][j], norms[xk][i], norms[yk][j])
          local s = c / t
          entries[#entries + 1] = { xk, yk, j, c, s, is_target }
          if s > m then m = s end
        end
      end
    end
    local z, target = 0, nil
    for _, e in ipairs(entries) do
      z = z + math.exp(e[5] - m)
      if e[6] then target = e end
    end
    local lse = m + math.log(z)
    loss = loss + lse - target[5]
    for _, e in ipairs(entries) do
      -- d loss / d s = (softmax - [target]) / B; s = cos / t
      local g = (math.exp(e[5] - lse) - (e[6] and 1 or 0)) / (B * t)
      if g ~= 0 then
        local xk, yk, j, c = e[1], e[2], e[3], e[4]
        local x, y = rows[xk][i], rows[yk][j]
        local nx, ny = norms[xk][i], norms[yk][j]
        local gx, gy = grads[xk][i], grads[yk][j]
        for q = 1, C do
          gx[q] = gx[q] + g * (y[q] / (nx * ny) - c * x[q] / (nx * nx))
          gy[q] = gy[q] + g * (x[q] / (nx * ny) - c * y[q] / (ny * ny))
        end
      end
    end
  end
  return loss / B, grads
end

local cls

function M.new(spec, opts)
  if not cls then
    cls = host.class(2, 3, false)
    cls.compute = compute
  end
  local loss = setmetatable({ kind = "gist", temperature = spec.temperature, margin = spec.margin or 0,
    margin_strategy = spec.margin_strategy, contrast_anchors = spec.contrast_anchors,
    contrast_positives = spec.contrast_positives }, cls)
  if spec.teacher then loss.teacher = require("trainer.losses.teacher").new(spec.teacher, "gist", opts) end
  return loss
end

return M
