-- bench/fused_ops.lua: the fused ops against the ops they replace, in one process,
-- alternating fused and unfused calls (A B A B ...) so that the load of a shared machine falls
-- on both alike; prints the best and the median of each and the ratio of the medians.
--   block end  ops.dropout_add_layernorm + its backward, against dropout -> add -> layernorm
--              and layernorm_backward -> dropout_backward (dropout 0.1, the LayerNorm's
--              parameter gradients accumulated), the end of a BERT block
--   ffn up     linear without bias + ops.bias_gelu + ops.bias_gelu_backward, against linear
--              with its bias + gelu + gelu_backward + the linear backward's bias gradient (the
--              GEMM is in both; the BERT layer keeps the unfused form, see models/bert/feedforward.lua)
--
--   ./trainer run bench/fused_ops.lua [--tokens 4096] [--hidden 384] [--intermediate 1536]
--       [--dtype f32|bf16|f16] [--reps 25]
-- Never a test: figures depend on the machine and its load.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")

local opt = { tokens = 4096, hidden = 384, intermediate = 1536, dtype = "f32", reps = 25 }
do
  local i = 1
  while arg and arg[i] do
    local k, v = arg[i]:match("^%-%-([%w_]+)=?(.*)$")
    if not k then error("bench/fused_ops.lua: unexpected argument " .. arg[i] .. " (flags are --name value)", 0) end
    if v == "" then i = i + 1; v = arg[i] end
    if opt[k] == nil then error("bench/fused_ops.lua: unknown flag --" .. k, 0) end
    opt[k] = type(opt[k]) == "number" and math.floor(assert(tonumber(v), "--" .. k .. " wants a number")) or v
    i = i + 1
  end
end

local now = require("trainer.core.sys").now

local N, H, I, dt = opt.tokens, opt.hidden, opt.intermediate, opt.dtype
local key = ops.rng_key({ seed = 1, step = 2, layer = 3, op = 4 })

-- ---------------------------------------------------------------- block end
local r = T.randn({ N, H }, { seed = 1, stream = 2, dtype = dt })
local dy = T.randn({ N, H }, { seed = 1, stream = 3, dtype = dt })
local w, b = T.ones({ H }), T.zeros({ H })
local dw, db = T.zeros({ H }), T.zeros({ H })

local function end_fused()
  local x = T.randn({ N, H }, { seed = 1, stream = 1, dtype = dt })
  local t0 = now()
  local y, sum, mean, rstd = ops.dropout_add_layernorm(x, r, w, b, 1e-12, 0.1, key)
  x:free()
  local dx, dres = ops.dropout_add_layernorm_backward(dy, sum, w, mean, rstd, dw, db, 0.1, key)
  local t = now() - t0
  for _, v in ipairs({ y, sum, mean, rstd, dx, dres }) do v:free() end
  return t
end

local function end_unfused()
  local x = T.randn({ N, H }, { seed = 1, stream = 1, dtype = dt })
  local t0 = now()
  local od = ops.dropout(x, 0.1, key)
  x:free()
  local sum = ops.add(od, r)
  od:free()
  local y, mean, rstd = ops.layernorm(sum, w, b, 1e-12)
  local dsum = ops.layernorm_backward(dy, sum, w, mean, rstd, dw, db)
  local dod = ops.dropout_backward(dsum, 0.1, key)
  local t = now() - t0
  for _, v in ipairs({ y, sum, mean, rstd, dsum, dod }) do v:free() end
  return t
end

-- ---------------------------------------------------------------- ffn up-projection
local xf = T.randn({ N, H }, { seed = 2, stream = 1, dtype = dt })
local W = T.randn({ I, H }, { seed = 2, stream = 2 })
local bias = T.randn({ I }, { seed = 2, stream = 3 })
local da = T.randn({ N, I }, { seed = 2, stream = 4, dtype = dt })
local dbias = T.zeros({ I })

local function up_fused()
  local t0 = now()
  local h = ops.linear(xf, W, nil)
  local a = ops.bias_gelu(h, bias, 0)
  local dh = ops.bias_gelu_backward(da, h, 0, dbias)
  local t = now() - t0
  h:free(); a:free(); dh:free()
  return t
end

local function up_unfused()
  local t0 = now()
  local h = ops.linear(xf, W, bias)
  local a = ops.gelu(h, 0)
  local dh = ops.gelu_backward(da, h, 0)
  ops.linear_backward(dh, nil, W, nil, dbias, false)
  local t = now() - t0
  h:free(); a:free(); dh:free()
  return t
end

-- ---------------------------------------------------------------- A B A B
local function compare(name, fused, unfused)
  local tf, tu = {}, {}
  fused(); unfused()   -- warm-up: caches, the allocator's blocks
  for _ = 1, opt.reps do
    tf[#tf + 1] = fused()
    tu[#tu + 1] = unfused()
  end
  table.sort(tf)
  table.sort(tu)
  local m = math.floor((opt.reps + 1) / 2)
  io.write(("%-10s %s %d x %d%s: fused best %.2f ms median %.2f ms | unfused best %.2f ms median %.2f ms | %.2fx\n"):format(
    name, dt, N, H, name == "ffn up" and (" -> " .. I) or "", tf[1] * 1e3, tf[m] * 1e3, tu[1] * 1e3, tu[m] * 1e3,
    tu[m] / tf[m]))
end

compare("block end", end_fused, end_unfused)
compare("ffn up", up_fused, up_unfused)
for _, t in ipairs({ r, dy, w, b, dw, db, xf, W, bias, da, dbias }) do t:free() end
