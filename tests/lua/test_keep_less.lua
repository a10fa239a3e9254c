-- Keeping less under LoRA + checkpointing: on all-MiniLM-L6-v2 with LoRA
-- (r 8, dropout 0.1, query and value) the step of tests/lua/keep_less_case.lua gives the
-- loss and every LoRA gradient of the golden file written before the change
-- (tests/ref/make_keep_less_golden.lua) to 1e-5, with a lower activations peak, checkpointed
-- per layer and plain, and (plain) fewer activation bytes kept after the forward. Prints "SKIP" when
-- models/all-MiniLM-L6-v2 is absent.
local native = require("trainer.native")
local json = require("trainer.core.json")
local case = dofile(native.root() .. "/tests/lua/keep_less_case.lua")

-- 1e-5: the golden is another build's float32 (the BLAS's kernel set, chosen by the CPU, and
-- the vectorised GELU move the last bits); a tensor kept wrongly changes gradients by far more.
local function close(a, b, what)
  local tol = 1e-5 * math.max(1, math.abs(b))
  assert(math.abs(a - b) <= tol, ("%s: %.12g, golden %.12g"):format(what, a, b))
end

local function check(name, ckpt)
  if not case.present() then print("SKIP test_keep_less: " .. case.dir .. " is absent") return end
  local golden = json.read(native.root() .. "/tests/data/keep_less_golden.json")[name]
  local got = case.run(ckpt)
  close(got.loss, golden.loss, name .. " loss")
  local n = 0
  for pname, g in pairs(golden.grads) do
    local h = assert(got.grads[pname], pname .. " has no gradient")
    close(h.sum, g.sum, pname .. " sum")
    close(h.abs, g.abs, pname .. " abs sum")
    for i = 1, 8 do close(h.first[i], g.first[i], pname .. "[" .. i .. "]") end
    n = n + 1
  end
  assert(n == 24, "24 LoRA parameters expected, golden has " .. n)
  print(("  %s: activations kept after forward %.2f MiB (before %.2f MiB), peak %.2f MiB (before %.2f MiB)"):format(
    name, got.saved / 2 ^ 20, golden.saved / 2 ^ 20, got.peak / 2 ^ 20, golden.peak / 2 ^ 20))
  -- checkpointed, the last segment (here the last layer) keeps its layers' tensors through the
  -- forward, which the golden's run re-made in the backward instead (trainer.nn.Checkpoint's
  -- keeps_forward): more kept after the forward at the same moment of the peak, so the peak
  -- alone compares there
  if not ckpt then
    assert(got.saved < golden.saved, ("%s: %d bytes kept, not fewer than %d"):format(name, got.saved, golden.saved))
  end
  assert(got.peak < golden.peak, ("%s: peak %d, not below %d"):format(name, got.peak, golden.peak))
  return got, golden
end

return {
  { "every_layer_checkpointed_same_gradients_fewer_bytes", function() check("every_layer", { every = 1 }) end },
  { "plain_same_gradients_fewer_bytes", function() check("plain", false) end },
}
