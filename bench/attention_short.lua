-- bench/attention_short.lua — time of one attention op (forward, no dropout) at the shapes of
-- a 32-sentence MiniLM encode batch: B = 32, H = 12, D = 32 (64 with D=64), T keys given:
--   ./trainer run bench/attention_short.lua [T ...]      (default: 8 13 20 30 64)
-- Prints "T=... : ... ms per call", the best of 10 runs of 200 calls. T <= 32 runs the
-- short-row kernel (kernels/cpu/attn_short.c) on AVX-512 CPUs, longer T the tiled one.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local wall = require("trainer.train.run").now
local B, H, D = 32, 12, tonumber(os.getenv("D") or "32")
local lengths = {}
for i = 1, #arg do lengths[#lengths + 1] = tonumber(arg[i]) end
if #lengths == 0 then lengths = { 8, 13, 20, 30, 64 } end
for _, n in ipairs(lengths) do
  local q = T.randn({ B, n, H, D }, { seed = 1 })
  local k = T.randn({ B, n, H, D }, { seed = 2 })
  local v = T.randn({ B, n, H, D }, { seed = 3 })
  local mask = T.ones({ B, n }, { dtype = "i32" })
  local best = math.huge
  for _ = 1, 10 do
    local t0 = wall()
    for _ = 1, 200 do
      local o, l = ops.attention(q, k, v, mask)
      o:free()
      l:free()
    end
    best = math.min(best, (wall() - t0) / 200)
  end
  print(("T=%d D=%d: %.3f ms per call"):format(n, D, best * 1e3))
  q:free(); k:free(); v:free(); mask:free()
end
return 0
