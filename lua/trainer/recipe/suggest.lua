-- trainer.recipe.suggest: "did you mean ...?" by edit distance, for unknown keys, globals,
-- subcommands and LoRA targets.
local M = {}

-- Levenshtein distance with transpositions counted as one edit (Damerau, restricted).
function M.distance(a, b)
  local la, lb = #a, #b
  local prev2, prev = {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    local cur = { [0] = i }
    for j = 1, lb do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local v = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = math.min(v, prev2[j - 2] + 1)
      end
      cur[j] = v
    end
    prev2, prev = prev, cur
  end
  return prev[lb]
end

-- The closest candidate to word, or nil when none is close enough to be a likely typo.
function M.closest(word, candidates)
  if #word < 3 then return nil end   -- one-letter names match everything: no useful hint
  local best, best_d
  local lw = word:lower()
  for _, c in ipairs(candidates) do
    local d = M.distance(lw, c:lower())
    if not best_d or d < best_d or (d == best_d and c < best) then best, best_d = c, d end
  end
  if best and best_d <= math.max(1, math.floor(#word / 3)) then return best end
  -- a containment match also counts ("segment" -> "segments")
  for _, c in ipairs(candidates) do
    if #c >= 3 and (lw:find(c:lower(), 1, true) or c:lower():find(lw, 1, true)) then return c end
  end
  -- and a short name the word starts with: "lrate" or "lr_rate" -> "lr" (the longest one)
  local prefix
  for _, c in ipairs(candidates) do
    if #c >= 2 and lw:sub(1, #c) == c:lower() and (not prefix or #c > #prefix) then prefix = c end
  end
  return prefix
end

-- " (did you mean 'x'?)" or "".
function M.hint(word, candidates)
  local c = M.closest(word, candidates)
  return c and (" (did you mean '%s'?)"):format(c) or ""
end

return M
