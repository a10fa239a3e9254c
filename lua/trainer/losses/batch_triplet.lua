-- trainer.losses.batch_triplet: sentence-transformers' batch triplet losses over one text
-- column with class labels: every pair of rows of the batch is compared by a distance
-- matrix D [B, B] (euclidean by default, or cosine; trainer.losses.host), rows of one label
-- are positives of each other, rows of other labels negatives. Margin 5 by default.
--   batch_hard_triplet (BatchHardTripletLoss): per anchor, its farthest positive and its
--     closest negative: loss = mean over anchors of relu(D(a, p_hard) - D(a, n_hard) + margin).
--   batch_semi_hard_triplet (BatchSemiHardTripletLoss): per anchor-positive pair, the closest
--     negative farther than the positive (else the anchor's farthest negative):
--     loss = sum of relu(D(a, p) - D(a, n_semi) + margin) / number of anchor-positive pairs.
--   batch_all_triplet (BatchAllTripletLoss): every valid triplet (a, p, n):
--     loss = sum of relu(D(a, p) - D(a, n) + margin) / number of triplets with a positive term.
-- Batches need several rows per label (data.sampler = "group_by_label" makes them).
-- Computed on the host in double; the selections and their tie-breaking are torch's
-- (first index of a max or min), so the gradient flows to the same entries as there.
local host = require("trainer.losses.host")

local M = {}

local function hard(_, D, y, m)
  local B = #D
  local gD = host.zeros(B, B)
  local loss = 0
  for i = 1, B do
    -- hardest positive: max over j of [same label, j ~= i] * D_ij (a 0 when none)
    local hp, hpj = -math.huge, nil
    local mx, mxj = -math.huge, nil
    for j = 1, B do
      local v = (y[j] == y[i] and j ~= i) and D[i][j] or 0
      if v > hp then hp, hpj = v, j end
      if D[i][j] > mx then mx, mxj = D[i][j], j end
    end
    -- hardest negative: min over j of D_ij + max_j D_ij * [same label]
    local hn, hnj = math.huge, nil
    for j = 1, B do
      local v = D[i][j] + (y[j] == y[i] and mx or 0)
      if v < hn then hn, hnj = v, j end
    end
    local t = hp - hn + m
    if t >= 0 then
      loss = loss + t
      local g = 1 / B
      if y[hpj] == y[i] and hpj ~= i then gD[i][hpj] = gD[i][hpj] + g end
      gD[i][hnj] = gD[i][hnj] - g
      if y[hnj] == y[i] then gD[i][mxj] = gD[i][mxj] - g end
    end
  end
  return loss / B, gD
end

local function semi_hard(_, D, y, m)
  local B = #D
  local gD = host.zeros(B, B)
  local npos = 0
  for i = 1, B do for j = 1, B do if i ~= j and y[i] == y[j] then npos = npos + 1 end end end
  local scale = 1 / math.max(npos, 1e-16)
  local loss = 0
  for i = 1, B do
    -- the row's negatives in ascending order (stable), and the fallback: its farthest
    -- negative (torch: max of (D - min) * [other label] + min; with no negative, the min)
    local negs = {}
    for j = 1, B do if y[j] ~= y[i] then negs[#negs + 1] = j end end
    table.sort(negs, function(p, q) if D[i][p] ~= D[i][q] then return D[i][p] < D[i][q] end return p < q end)
    local mn, mnj = math.huge, nil
    for j = 1, B do if D[i][j] < mn then mn, mnj = D[i][j], j end end
    local insj, insv = nil, -math.huge
    for j = 1, B do
      local v = (y[j] ~= y[i]) and (D[i][j] - mn) or 0
      if v > insv then insv, insj = v, j end
    end
    local inside = insv + mn
    for j = 1, B do
      if j ~= i and y[j] == y[i] then
        local nj
        for _, k in ipairs(negs) do
          if D[i][k] > D[i][j] then nj = k break end
        end
        local semi = nj and D[i][nj] or inside
        local t = D[i][j] - semi + m
        if t > 0 then
          loss = loss + t
          gD[i][j] = gD[i][j] + scale
          if nj then
            gD[i][nj] = gD[i][nj] - scale
          elseif y[insj] ~= y[i] then
            gD[i][insj] = gD[i][insj] - scale
          else
            gD[i][mnj] = gD[i][mnj] - scale
          end
        end
      end
    end
  end
  return loss * scale, gD
end

local function all(_, D, y, m)
  local B = #D
  local gD = host.zeros(B, B)
  local terms, count = {}, 0
  local loss = 0
  for a = 1, B do
    for p = 1, B do
      if p ~= a and y[p] == y[a] then
        for n = 1, B do
          if y[n] ~= y[a] then
            local t = D[a][p] - D[a][n] + m
            if t > 0 then
              loss = loss + t
              if t > 1e-16 then count = count + 1 end
              terms[#terms + 1] = { a, p, n }
            end
          end
        end
      end
    end
  end
  local g = 1 / (count + 1e-16)
  for _, t in ipairs(terms) do
    gD[t[1]][t[2]] = gD[t[1]][t[2]] + g
    gD[t[1]][t[3]] = gD[t[1]][t[3]] - g
  end
  return loss * g, gD
end

local select = { batch_hard_triplet = hard, batch_semi_hard_triplet = semi_hard, batch_all_triplet = all }

local classes = {}

function M.new(spec)
  local name = spec.name
  local cls = classes[name]
  if not cls then
    cls = host.class(1, 1, true)
    local pick = select[name]
    function cls:compute(rows, labels)
      local E = rows[1]
      local D = self.metric.matrix(E)
      local loss, gD = pick(self, D, labels, self.margin)
      local gE = host.zeros(#E, #E[1])
      self.metric.back(E, D, gD, gE)
      return loss, { gE }
    end
    classes[name] = cls
  end
  local distance = spec.distance or "euclidean"
  return setmetatable({ kind = name, metric = host.batch[distance], distance = distance,
    margin = spec.margin or 5 }, cls)
end

return M
