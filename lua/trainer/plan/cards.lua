-- trainer.plan.cards: the cards users fine-tune on, as `trainer plan --card NAME` plans for
-- them on a machine that has none: each card's compute capability (which precisions it
-- computes in) and its memory as the driver reports it (nvidia-smi's total, what a run can
-- address before the CUDA context). The figures are the vendors' published ones.
local M = {}

local GIB, MIB = 1024 ^ 3, 1024 ^ 2

-- name -> { name, major, minor, memory_bytes }; lower-case keys, as typed after --card
M.list = {
  ["v100-16"] = { name = "Tesla V100 16 GB", major = 7, minor = 0, memory_bytes = 16160 * MIB },
  ["v100-32"] = { name = "Tesla V100 32 GB", major = 7, minor = 0, memory_bytes = 32510 * MIB },
  t4 = { name = "Tesla T4", major = 7, minor = 5, memory_bytes = 15360 * MIB },
  ["rtx2080ti"] = { name = "GeForce RTX 2080 Ti", major = 7, minor = 5, memory_bytes = 11264 * MIB },
  ["a100-40"] = { name = "A100 40 GB", major = 8, minor = 0, memory_bytes = 40960 * MIB },
  ["a100-80"] = { name = "A100 80 GB", major = 8, minor = 0, memory_bytes = 81920 * MIB },
  a10 = { name = "A10", major = 8, minor = 6, memory_bytes = 23028 * MIB },
  ["rtx3090"] = { name = "GeForce RTX 3090", major = 8, minor = 6, memory_bytes = 24 * GIB },
  l4 = { name = "L4", major = 8, minor = 9, memory_bytes = 23034 * MIB },
  ["rtx4090"] = { name = "GeForce RTX 4090", major = 8, minor = 9, memory_bytes = 24 * GIB },
  h100 = { name = "H100 80 GB", major = 9, minor = 0, memory_bytes = 81559 * MIB },
  h200 = { name = "H200", major = 9, minor = 0, memory_bytes = 143771 * MIB },
  b200 = { name = "B200", major = 10, minor = 0, memory_bytes = 183359 * MIB },
  ["rtx5090"] = { name = "GeForce RTX 5090", major = 12, minor = 0, memory_bytes = 32607 * MIB },
  ["rtx4080"] = { name = "GeForce RTX 4080", major = 8, minor = 9, memory_bytes = 16376 * MIB },
  a4000 = { name = "RTX A4000", major = 8, minor = 6, memory_bytes = 16376 * MIB },
}

-- Each card's published dense peak rates, for trainer.plan.time's predicted step time: f32
-- (CUDA cores), half (bf16, or fp16 before Ampere, on the tensor cores with f32 accumulation:
-- GeForce cards run that at half their fp16-accumulating rate) in TFLOP/s, and memory
-- bandwidth in GB/s; `match`: Lua patterns of the driver's name (lower case, spaces and
-- dashes removed) that mean this card.
M.rates = {
  ["v100-16"] = { tflops = 15.7, half_tflops = 125, gbps = 900, match = { "v100.*16", "v100" } },
  ["v100-32"] = { tflops = 15.7, half_tflops = 125, gbps = 900, match = { "v100.*32" } },
  t4 = { tflops = 8.1, half_tflops = 65, gbps = 320, match = { "t4$", "teslat4" } },
  ["rtx2080ti"] = { tflops = 13.4, half_tflops = 53.8, gbps = 616, match = { "2080ti" } },
  ["a100-40"] = { tflops = 19.5, half_tflops = 312, gbps = 1555, match = { "a100.*40" , "a100" } },
  ["a100-80"] = { tflops = 19.5, half_tflops = 312, gbps = 2039, match = { "a100.*80" } },
  a10 = { tflops = 31.2, half_tflops = 125, gbps = 600, match = { "a10$", "a10g?$" } },
  ["rtx3090"] = { tflops = 35.6, half_tflops = 71, gbps = 936, match = { "3090" } },
  l4 = { tflops = 30.3, half_tflops = 121, gbps = 300, match = { "l4$" } },
  ["rtx4090"] = { tflops = 82.6, half_tflops = 165, gbps = 1008, match = { "4090" } },
  h100 = { tflops = 67, half_tflops = 989, gbps = 3350, match = { "h100" } },
  h200 = { tflops = 67, half_tflops = 989, gbps = 4800, match = { "h200" } },
  b200 = { tflops = 80, half_tflops = 2250, gbps = 8000, match = { "b200" } },
  ["rtx5090"] = { tflops = 104.8, half_tflops = 209.5, gbps = 1792, match = { "5090" } },
  ["rtx4080"] = { tflops = 48.7, half_tflops = 97.5, gbps = 717, match = { "4080" } },
  a4000 = { tflops = 19.2, half_tflops = 76.7, gbps = 448, match = { "a4000" } },
}

-- The rates row of a card (M.find's or trainer.core.card.of's) with its name, or nil when no
-- row's name matches (the longest match wins: "a100 80gb" is the A100 80 GB, not the 40).
function M.rates_of(card)
  if not card or not card.name then return nil end
  local key = card.name:lower():gsub("nvidia", ""):gsub("[%s_%-]", "")
  local best, best_len
  for k, row in pairs(M.rates) do
    local own = M.list[k].name:lower():gsub("[%s_%-]", "")
    for _, pat in ipairs(row.match) do
      local a, b = key:find(pat)
      local len = a and (b - a + 1 + (key == own and 100 or 0))
      if key == own then a, len = 1, 1000 end
      if a and (not best_len or len > best_len) then best, best_len = k, len end
    end
  end
  if not best then return nil end
  local row = M.rates[best]
  return { name = M.list[best].name, tflops = row.tflops, half_tflops = row.half_tflops, gbps = row.gbps }
end

-- The names, sorted, for messages and --help.
function M.names()
  local names = {}
  for k in pairs(M.list) do names[#names + 1] = k end
  table.sort(names)
  return names
end

-- The card called `name` (case and a leading "nvidia-" ignored) as trainer.core.card.of gives a
-- real one, with planned = true; raises a user error naming the known cards otherwise.
function M.find(name)
  local key = tostring(name):lower():gsub("^nvidia[-_ ]?", ""):gsub("[ _]", "-")
  local c = M.list[key] or M.list[(key:gsub("-", ""))]
  if not c then
    require("trainer.core.errors").user("--card %s: not a card this plan knows; use one of %s (or plan on the "
      .. "machine with the card, or give --budget SIZE)", tostring(name), table.concat(M.names(), ", "))
  end
  return { name = c.name, major = c.major, minor = c.minor, cc = ("%d.%d"):format(c.major, c.minor),
    memory_bytes = c.memory_bytes, planned = true }
end

return M
