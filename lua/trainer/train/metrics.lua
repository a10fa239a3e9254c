-- trainer.train.metrics: evaluation statistics on Lua arrays of numbers, computed in double.
--   metrics.pearson(x, y)    Pearson's r (scipy.stats.pearsonr)
--   metrics.spearman(x, y)   Spearman's rho: Pearson of the ranks, ties given their average
--                            rank (scipy.stats.spearmanr)
--   metrics.ranks(x)         1-based average ranks
--   metrics.accuracy(pred, gold)   fraction of equal entries
-- A constant input has no correlation: pearson and spearman return NaN then, as scipy does.
-- Inputs of different lengths or fewer than 2 items are user errors.
local errors = require("trainer.core.errors")

local M = {}

local function check_pair(what, x, y, min)
  if type(x) ~= "table" or type(y) ~= "table" then errors.user("metrics.%s: expects two arrays of numbers", what) end
  if #x ~= #y then errors.user("metrics.%s: the arrays have %d and %d items; they must pair up", what, #x, #y) end
  if #x < min then errors.user("metrics.%s: needs at least %d items, got %d", what, min, #x) end
end

function M.ranks(x)
  local n, idx = #x, {}
  for i = 1, n do idx[i] = i end
  table.sort(idx, function(a, b) if x[a] ~= x[b] then return x[a] < x[b] end return a < b end)
  local r = {}
  local i = 1
  while i <= n do
    local j = i
    while j < n and x[idx[j + 1]] == x[idx[i]] do j = j + 1 end
    local avg = (i + j) / 2   -- positions i..j share the mean of their ranks
    for k = i, j do r[idx[k]] = avg end
    i = j + 1
  end
  return r
end

function M.pearson(x, y)
  check_pair("pearson", x, y, 2)
  local n, mx, my = #x, 0, 0
  for i = 1, n do mx, my = mx + x[i], my + y[i] end
  mx, my = mx / n, my / n
  local sxy, sxx, syy = 0, 0, 0
  for i = 1, n do
    local dx, dy = x[i] - mx, y[i] - my
    sxy, sxx, syy = sxy + dx * dy, sxx + dx * dx, syy + dy * dy
  end
  if sxx == 0 or syy == 0 then return 0 / 0 end
  local r = sxy / math.sqrt(sxx * syy)
  return math.max(-1, math.min(1, r))
end

function M.spearman(x, y)
  check_pair("spearman", x, y, 2)
  return M.pearson(M.ranks(x), M.ranks(y))
end

function M.accuracy(pred, gold)
  check_pair("accuracy", pred, gold, 1)
  local hit = 0
  for i = 1, #gold do if pred[i] == gold[i] then hit = hit + 1 end end
  return hit / #gold
end

return M
