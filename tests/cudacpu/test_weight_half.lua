-- tests/cudacpu/test_weight_half.lua — the bf16 copy a CUDA product reads of an f32 weight beside
-- bf16 activations (core/cuda_ops/weight_half.c): made once and reused while the weight is
-- unchanged (one cast launch for several products), made again after every kind of write of
-- the weight (an op, a copy from the host, a fill), counted under the workspace tag and freed
-- with the weight; the products agree with the CPU's; a tensor not tagged weights is cast per
-- product and never kept.
-- Run: build/cudacpu/trainer run tests/cudacpu/test_weight_half.lua
local ffi = require("ffi")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local memory = require("trainer.core.memory")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu") .. "/harness.lua")
local check, rel_diff, launches, log_mark, log_ok = h.check, h.rel_diff, h.launches, h.log_mark, h.log_ok
local values = h.sines

local N, I, O = 24, 40, 16
local xs, ws = values(N * I, 0.37), values(O * I, 0.11)
local x = T.from_table(xs, { dtype = "bf16", device = "cuda", tag = "activations" }):reshape({ N, I })
local w = T.scope(function()   -- the reshaped view alone holds the storage, so w:free() frees it
  return T.from_table(ws, { dtype = "f32", device = "cuda", tag = "weights" }):reshape({ O, I })
end)
local x_cpu = x:to("cpu")
-- the CPU's product with the weight rounded to bf16, as the copy holds it
local function cpu_linear(wv)
  return ops.linear(x_cpu, T.from_table(wv, { dtype = "bf16" }):to("f32"):reshape({ O, I }))
end

check("the launch log is on", log_ok, "build/cudacpu/trainer has no cudacpu launch log")
if not log_ok then os.exit(1) end
ffi.C.cudacpu_launch_log(1)

local ws0 = memory.stats("cuda").by_tag.workspace
local m = log_mark()
local y1 = ops.linear(x, w)
local y2 = ops.linear(x, w)
local dy = T.from_table(values(N * O, 0.23), { dtype = "bf16", device = "cuda", tag = "activations" }):reshape({ N, O })
local dx = ops.linear_backward(dy, nil, w, nil, nil, true)
check("one cast for two forwards and an input gradient of an unchanged weight", launches("map1", m) == 1,
  launches("map1", m) .. " cast launches")
local kept = memory.stats("cuda").by_tag.workspace - ws0
check("the copy is kept under the workspace tag", kept >= O * I * 2, kept .. " bytes")
check("the forward agrees with the CPU's f32 product within the output's bf16 rounding", rel_diff(y1, cpu_linear(ws)) < 1e-2,
  rel_diff(y1, cpu_linear(ws)))
check("two forwards from the copy are the same bits", rel_diff(y1, y2) == 0, rel_diff(y1, y2))
local dx_ref = ops.linear_backward(dy:to("cpu"), nil, T.from_table(ws, { dtype = "bf16" }):to("f32"):reshape({ O, I }),
  nil, nil, true)
check("the input gradient agrees with the CPU's", rel_diff(dx, dx_ref) < 1e-2, rel_diff(dx, dx_ref))

-- every kind of write makes the next product read the new values
local w2 = {}
for i = 1, O * I do w2[i] = 2 * ws[i] + 0.5 end
local function after(name, write, expect)
  write()
  local mk = log_mark()
  local y = ops.linear(x, w)
  check(name .. ": the copy is made again", launches("map1", mk) == 1, launches("map1", mk) .. " casts")
  check(name .. ": the product reads the new weight", rel_diff(y, cpu_linear(expect)) < 1e-2,
    rel_diff(y, cpu_linear(expect)))
end
after("an op writing the weight", function() ops.scale_(w, 2); ops.add_(w, T.full({ O, I }, 0.5,
  { device = "cuda", tag = "workspace" })) end, w2)
local w3 = values(O * I, 0.29)
after("a copy from the host", function()
  runtime.check(C.tr_tensor_copy(runtime.ctx, w:ptr(), T.from_table(w3, { dtype = "f32" }):reshape({ O, I }):ptr()), "copy")
end, w3)
local w4 = {}
for i = 1, O * I do w4[i] = 0.25 end
after("a fill", function() w:fill(0.25) end, w4)

-- an f32 activation (not a weight) is cast per product and never kept
local a = T.from_table(ws, { dtype = "f32", device = "cuda", tag = "activations" }):reshape({ O, I })
local before = memory.stats("cuda").by_tag.workspace
local mk = log_mark()
ops.linear(x, a); ops.linear(x, a)
check("an f32 tensor not tagged weights is cast at each product", launches("map1", mk) == 2, launches("map1", mk))
check("and leaves no copy behind", memory.stats("cuda").by_tag.workspace == before,
  memory.stats("cuda").by_tag.workspace - before)

-- the copy goes with the weight
local with_copy = memory.stats("cuda").by_tag.workspace
w:free()
check("the copy is freed with the weight", memory.stats("cuda").by_tag.workspace <= with_copy - O * I * 2,
  with_copy - memory.stats("cuda").by_tag.workspace)

h.finish()
