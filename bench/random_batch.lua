-- bench/random_batch.lua: the fixed random batch of the training benchmarks (train_step.lua,
-- memory.lua), loaded with dofile:
--   local random_batch = dofile(require("trainer.native").root() .. "/bench/random_batch.lua")
--   local b = random_batch.new(B, S, vocab, seed, lo, cls, sep[, device])
-- b.input_ids and b.attention_mask are i32 [B, S] on device (default the CPU; tag
-- activations; the caller frees them),
-- b.labels B class ids 0/1. Every row is S tokens: cls, S - 2 ids drawn from lo..vocab-1,
-- sep; no padding. The draws are one linear congruential sequence from seed: the ids row
-- by row, then the labels.
local T = require("trainer.core.tensor")

local M = {}

-- An i32 [rows, cols] tensor of values (row-major) on device (nil: the CPU), tag activations.
function M.int_matrix(values, rows, cols, device)
  local flat = T.from_table(values, { dtype = "i32", device = device, tag = "activations" })
  local t = flat:reshape({ rows, cols })
  flat:free()
  return t
end

function M.new(B, S, vocab, seed, lo, cls, sep, device)
  local ids, s = {}, seed
  local function rnd(k) s = (s * 1103515245 + 12345) % 2147483648 return s % k end
  for b = 0, B - 1 do
    for t = 1, S do ids[b * S + t] = t == 1 and cls or (t == S and sep or lo + rnd(vocab - lo)) end
  end
  local labels, mask = {}, {}
  for b = 1, B do labels[b] = rnd(2) end
  for i = 1, B * S do mask[i] = 1 end
  return { input_ids = M.int_matrix(ids, B, S, device), attention_mask = M.int_matrix(mask, B, S, device), labels = labels }
end

return M
