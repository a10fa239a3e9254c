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
}

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
