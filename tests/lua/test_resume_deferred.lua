-- Exact resume on the deferred path: fp16 with the loss scale living on the device
-- (amp Scaler:to_device: the seed scaled there, the unscale by its inverse, the update from
-- the found-inf flag there, AdamW skipping on the flag with the device skip count), the
-- batches through the batch feed, the losses read once per logged step: the path a GPU run
-- takes, with the CPU standing in for the device (lazy_scalars, batch_feed). A run stopped
-- after step 5 (a hook's stop at its save, as SIGINT does; the scale then 2^19, not the
-- initial one, with one clean step counted toward its growth) and continued with what
-- `trainer resume RUN_DIR` runs (trainer.train.resume.load, then the loop) writes the
-- metrics rows of the unbroken run bit for bit (loss, loss_scale, skipped, grad_norm, lr)
-- and the same final weights, over a run that skips steps and grows its scale on both sides
-- of the stop (a tiny classifier with cross_entropy; init_scale 2^20 overflows its fp16
-- gradients, growth_interval 2: skips at steps 1, 4, 7, 10, growths at 3, 6, 9); and the
-- unbroken deferred run writes the eager fp16 run's rows.
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local json = require("trainer.core.json")
local outputs = require("trainer.train.outputs")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")
local resume = require("trainer.train.resume")
local st = require("trainer.core.safetensors")

local fx
local function setup()
  if fx then return fx end
  fx = lib.tiny_pairs({ model_seed = 6, text_seed = 31, max_extra = 5, rows = 48, score_format = "%d",
                        score = function(rnd) return rnd(3) - 1 end })
  require("trainer.models").tiny_folder(fx .. "/cls", { seed = 6, task = "classification" })
  return fx
end

local SCALER = { init_scale = 2 ^ 20, growth_interval = 2 }
local DEVICE_PATH = { lazy_scalars = true, batch_feed = true, scaler = SCALER }

local function recipe_file(name, extra)
  local d = setup()
  local path = ("%s/%s.lua"):format(d, name)
  lib.write(path, ([[
return {
  model = { from = %q, task = "classification" },
  data = { train = %q, columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cross_entropy" }, optim = { lr = 1e-3 }, batch = { size = 8 }, steps = 10,
  precision = "fp16", grad_clip = 1.0, log = { every = 4, quiet = true }, device = "cpu", seed = 3,
  eval = { at_start = false }, out = %q,
  %s
}
]]):format(d .. "/cls", d .. "/train.jsonl", d .. "/" .. name, extra or ""))
  return path
end

local function train(resolved, opts)
  local o = { quiet = true }
  for k, v in pairs(opts) do o[k] = v end
  require("trainer.core.memory").empty_cache()
  return loop.train(resolved, o)
end

local KEYS = { "step", "loss", "loss_scale", "skipped", "grad_norm", "lr", "tokens" }

local function rows_of(out)
  local rows = {}
  for i, m in ipairs(outputs.read_metrics(out)) do
    local r = {}
    for _, k in ipairs(KEYS) do r[k] = m[k] end
    rows[i] = r
  end
  return rows
end

local function same_rows(a, b, what)
  assert(#a == #b, ("%s: %d rows vs %d"):format(what, #a, #b))
  for i = 1, #a do
    for _, k in ipairs(KEYS) do
      if a[i][k] ~= b[i][k] then
        error(("%s: step %d %s: %s vs %s"):format(what, i, k, json.encode(a[i][k]), json.encode(b[i][k])))
      end
    end
  end
end

-- Every tensor of the last checkpoint's weights, as bytes.
local function weights_of(out)
  local ffi, C, runtime = require("ffi"), require("trainer.core.ffi"), require("trainer.core.runtime")
  local cks = outputs.checkpoints(out)
  local ck = assert(cks[#cks], out .. ": no checkpoint").dir
  local r = st.load(ck)
  local t = {}
  for _, name in ipairs(r:names()) do
    local x = r:tensor(name)
    local n = x:nbytes()
    local buf = ffi.new("uint8_t[?]", math.max(n, 1))
    runtime.check(C.tr_tensor_read(runtime.ctx, x:ptr(), buf, n), "weights_of")
    t[name] = ffi.string(buf, n)
    x:free()
  end
  r:close()
  return t, ck
end

local tests = {}

tests[#tests + 1] = { "fp16_device_scale_resume_is_bitwise_unbroken", function()
  local full = recipe_file("full")
  assert(train(recipe.load(full), DEVICE_PATH) == 0)
  local want = rows_of(setup() .. "/full")
  -- the case must skip and grow before and after the stop
  local skips, grows = { 0, 0 }, { 0, 0 }
  for i, r in ipairs(want) do
    local side = i <= 5 and 1 or 2
    if r.skipped then skips[side] = skips[side] + 1 end
    if i > 1 and r.loss_scale > want[i - 1].loss_scale then grows[side] = grows[side] + 1 end
  end
  assert(skips[1] >= 1 and grows[1] >= 1 and grows[2] >= 1,
    ("the case must skip and grow on both sides: skips %d/%d, growths %d/%d"):format(skips[1], skips[2], grows[1],
      grows[2]))
  -- the eager fp16 path writes the same rows
  local eager = recipe_file("eager")
  assert(train(recipe.load(eager), { scaler = SCALER }) == 0)
  same_rows(rows_of(setup() .. "/eager"), want, "eager vs deferred")

  local part = recipe_file("part", [[
  save = { every = 5 },
  hooks = { on_save = function(t) if t.step == 5 then t.stop_signal = 2 end end },
]])
  assert(train(recipe.load(part), DEVICE_PATH) == 130, "the stop")
  local stopped = rows_of(setup() .. "/part")
  assert(#stopped == 5, #stopped .. " rows before the stop")
  local resolved = resume.load(setup() .. "/part")   -- what `trainer resume RUN_DIR` runs
  assert(train(resolved, DEVICE_PATH) == 0, "the resume")
  same_rows(rows_of(setup() .. "/part"), want, "resumed vs unbroken")
  local wa, cka = weights_of(setup() .. "/full")
  local wb, ckb = weights_of(setup() .. "/part")
  assert(cka:match("checkpoint%-10$") and ckb:match("checkpoint%-10$"), cka .. " " .. ckb)
  local n = 0
  for name, v in pairs(wa) do
    assert(wb[name] == v, name .. " differs after the resume")
    n = n + 1
  end
  assert(n > 10, n .. " tensors compared")
  local sa = json.read(setup() .. "/full/summary.json")
  local sb = json.read(setup() .. "/part/summary.json")
  assert(sa.skipped_steps == sb.skipped_steps and sa.final_loss == sb.final_loss,
    ("summary: skipped %s vs %s, final loss %s vs %s"):format(tostring(sa.skipped_steps), tostring(sb.skipped_steps),
      tostring(sa.final_loss), tostring(sb.final_loss)))
end }

return lib.with_cleanup(tests, function()
  if fx then os.execute("rm -rf " .. outputs.quote(fx)) fx = nil end
end)
