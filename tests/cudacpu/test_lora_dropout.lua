-- tests/cudacpu/test_lora_dropout.lua — a LoRA layer with its dropout on, on device = "cuda"
-- against the CPU: the forward and backward of LoraLinear in bf16 activations (the output,
-- the input gradient, both factors' gradients) agree, and under the emulator (its launch log)
-- neither the forward nor the backward makes a dropout pass or an add pass of its own: the
-- dropout rides in dropout_linear's kernels and the LoRA path's input gradient is summed into
-- the base's there.
-- Run: build/cudacpu/trainer run tests/cudacpu/test_lora_dropout.lua
local ffi = require("ffi")
local T = require("trainer.core.tensor")
local Module = require("trainer.nn.module")
local Linear = require("trainer.nn.linear")
local lora = require("trainer.train.lora")

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu") .. "/harness.lua")
local check, rel_diff, launches, log_ok, values = h.check, h.rel_diff, h.launches, h.log_ok, h.sines

local N, I, O = 40, 48, 32

-- forward and backward of one adapted Linear on `device`: y, dx, dA, dB and the launches
local function run(device)
  local lin = Linear.new(I, O, { device = device })
  lin.weight.value:fill(0)
  local wv = T.from_table(values(O * I, 0.13), { dtype = "bf16", device = device, tag = "weights" })
  lin:set_trainable(false)
  local rng = { seed = 5, step = 2 }
  local m = lora.LoraLinear.new(lin, { r = 8, alpha = 16, dropout = 0.1 }, 1, rng, 0)
  -- a bf16 frozen base (as amp.prepare leaves it) and a non-zero B, so every path carries values
  lin.weight.value:free()
  lin.weight.value = T.keep(wv:reshape({ O, I }))
  wv:free()
  -- B's values bf16-exact: the GPU's products read the f32 factors through their bf16 copies
  local b16 = T.from_table(values(O * 8, 0.31), { dtype = "bf16", device = device, tag = "weights" })
  local bv = b16:to({ dtype = "f32", tag = "weights" })
  b16:free()
  m.lora_B.value:free()
  m.lora_B.value = T.keep(bv:reshape({ O, 8 }))
  bv:free()
  local x = T.from_table(values(N * I, 0.07), { dtype = "bf16", device = device, tag = "activations" }):reshape({ N, I })
  local dy = T.from_table(values(N * O, 0.19), { dtype = "bf16", device = device, tag = "activations" }):reshape({ N, O })
  local first = (log_ok and device ~= "cpu") and h.log_mark() or nil
  local y = m:forward(x)
  local dx = m:backward(dy)
  local out = { y = y:to("cpu"), dx = dx:to("cpu"), dA = Module.grad_of(m.lora_A):to("cpu"),
    dB = Module.grad_of(m.lora_B):to("cpu") }
  if first then
    out.dropouts = launches("dropout_kernel", first)
    out.adds = launches("binary_bcast", first)
    out.fused = launches("dl_", first)
  end
  m:free()
  return out
end

if log_ok then ffi.C.cudacpu_launch_log(1) end
local cpu, cuda = run("cpu"), run("cuda")
for _, k in ipairs({ "y", "dx", "dA", "dB" }) do
  local d = rel_diff(cuda[k], cpu[k])
  check(k .. " agrees with the CPU", d < 2e-2, ("%s differs by %.3g"):format(k, d))
end
if cuda.dropouts then
  check("no dropout pass of its own", cuda.dropouts == 0, cuda.dropouts .. " dropout launches")
  check("no add pass for the LoRA path's input gradient", cuda.adds == 0, cuda.adds .. " add launches")
  check("the fused kernels ran", cuda.fused == 4, cuda.fused .. " dropout_linear launches (want 1 + 3)")
end
h.finish()
