-- The loss read once per logged step. On the CPU the run's metrics.jsonl
-- is the one written before the change (tests/data/step_reads_golden.json, tokens_per_s
-- aside; to 1e-5 relative, the golden being another build's float32) with log.every 1 and 5; with the device's deferred values (lazy_scalars, as a run
-- on a GPU has) the losses, grad norms and every other non-memory field are the same bits,
-- and the values are read only at the logged steps (1, 5, 10 and the last); a non-finite
-- deferred loss stops the run naming the step it happened at; trainer.train.deferred's
-- arithmetic is the eager arithmetic. The optimizer update: a deferred run calls
-- no host-result op and reads nothing between logged steps, bf16 and fp16 deferred runs
-- give the eager rows, and a non-finite deferred clip norm stops the run naming its step.
-- Under fp16 a deferred train step reads nothing either (the loss scale on the device).
local native = require("trainer.native")
local json = require("trainer.core.json")
local T = require("trainer.core.tensor")
local deferred = require("trainer.train.deferred")
local Run = require("trainer.train.run").Run
local case = dofile(native.root() .. "/tests/lua/step_reads_case.lua")

local golden = json.read(native.root() .. "/tests/data/step_reads_golden.json")

-- rel: 0 for the same bits (two runs of this build), else the relative tolerance against the
-- golden file, which another build wrote: the BLAS's kernel set (chosen by the CPU) and the
-- vectorised GELU change the last bits of a float32 step, not its values to 1e-5.
local function same(a, b, path, skip, rel)
  if type(a) ~= type(b) then error(("%s: %s vs %s"):format(path, tostring(a), tostring(b))) end
  if type(a) == "table" then
    for k, v in pairs(b) do if not (skip and skip[k]) then same(a[k], v, path .. "." .. tostring(k), nil, rel) end end
    for k in pairs(a) do
      if b[k] == nil and not (skip and skip[k]) then error(path .. "." .. tostring(k) .. " is new") end
    end
  elseif type(a) == "number" and (rel or 0) > 0 then
    if math.abs(a - b) > rel * math.max(1, math.abs(b)) then
      error(("%s: %.17g vs golden %.17g"):format(path, a, b))
    end
  elseif a ~= b then
    error(("%s: %.17g vs %.17g"):format(path, a, b))
  end
end

local function compare_rows(rows, want, skip, rel)
  assert(#rows == #want, ("%d rows, expected %d"):format(#rows, #want))
  for i = 1, #rows do same(rows[i], want[i], "row " .. i, skip, rel) end
end
-- The golden's memory fields are the OpenBLAS path's: with oneDNN the workspace also holds
-- the packed Linear weights (core/cpu_device/cpu_gemm.h), so there only the values are compared
-- (tests/cli/test_cpu_gemm.sh runs this file with TRAINER_CPU_GEMM=openblas, memory too).
local memory_fields
local function compare(rows)
  local onednn = require("trainer.plan").cpu_gemm_library() == "onednn"
  compare_rows(rows, golden, onednn and memory_fields or nil, 1e-5)
end

-- this build's eager rows (log every 1 and 5), once: the deferred runs must give their bits
local eager_cache = {}
local function eager_rows(every)
  eager_cache[every] = eager_cache[every] or case.run(every)
  return eager_cache[every]
end

memory_fields = { mem_allocated = true, mem_reserved = true, mem_peak = true, mem_by_tag = true,
  mem_peak_by_tag = true }

local function counting_reads(fn)
  local reads, orig = {}, Run.read_scalars
  Run.read_scalars = function(self)
    if #self.unread > 0 then reads[#reads + 1] = self.step end
    return orig(self)
  end
  local ok, err = pcall(fn)
  Run.read_scalars = orig
  if not ok then error(err, 0) end
  return reads
end

return {
  { "cpu_metrics_unchanged_log_every_1", function() compare(eager_rows(1)) end },
  { "cpu_metrics_unchanged_log_every_5", function() compare(eager_rows(5)) end },
  { "deferred_same_values_read_at_logged_steps", function()
    local rows
    local reads = counting_reads(function() rows = case.run(5, { lazy_scalars = true }) end)
    compare_rows(rows, eager_rows(5), memory_fields, 0)
    assert(table.concat(reads, ",") == "1,5,10,12", "reads at steps " .. table.concat(reads, ","))
    reads = counting_reads(function() rows = case.run(1, { lazy_scalars = true }) end)
    compare_rows(rows, eager_rows(1), memory_fields, 0)
    assert(#reads == 12, #reads .. " reads")
  end },
  { "deferred_steps_call_no_host_result_op", function()
    -- between logged steps a device run reads nothing: no tensor:item() outside
    -- read_scalars, no host-result norm or finite check (the clip, the flag and AdamW stay
    -- in tensors); the eager CPU run still takes its host path
    local ops = require("trainer.core.ops")
    local Tensor = getmetatable(T.full({ 1 }, 0)).__index
    local item, gn, scf, rs = Tensor.item, ops.global_norm, ops.scale_check_finite, Run.read_scalars
    local inside, stray, host_ops, into = false, 0, 0, 0
    Tensor.item = function(t) if not inside then stray = stray + 1 end return item(t) end
    ops.global_norm = function(...) host_ops = host_ops + 1 return gn(...) end
    ops.scale_check_finite = function(...) host_ops = host_ops + 1 return scf(...) end
    Run.read_scalars = function(self) inside = true local ok, e = pcall(rs, self) inside = false
      if not ok then error(e, 0) end end
    local gi = ops.global_norm_into
    ops.global_norm_into = function(...) into = into + 1 return gi(...) end
    local ok, err = pcall(case.run, 5, { lazy_scalars = true })
    local lazy = { stray = stray, host_ops = host_ops, into = into }
    stray, host_ops, into = 0, 0, 0
    local ok2, err2 = pcall(case.run, 5)
    Tensor.item, ops.global_norm, ops.scale_check_finite, Run.read_scalars = item, gn, scf, rs
    ops.global_norm_into = gi
    assert(ok, tostring(err)); assert(ok2, tostring(err2))
    assert(lazy.stray == 0 and lazy.host_ops == 0 and lazy.into == 12,
      ("deferred run: %d stray reads, %d host-result ops, %d norms into tensors"):format(lazy.stray, lazy.host_ops,
        lazy.into))
    assert(host_ops == 12 and into == 0, ("eager run: %d host-result ops, %d into"):format(host_ops, into))
  end },
  { "deferred_bf16_and_fp16_same_values_as_eager", function()
    for _, precision in ipairs({ "bf16", "fp16" }) do
      local eager = case.run(5, { precision = precision })
      local lazy = case.run(5, { precision = precision, lazy_scalars = true })
      assert(#lazy == #eager and #eager == 12, precision .. ": rows")
      for i = 1, #eager do same(lazy[i], eager[i], precision .. " row " .. i, memory_fields) end
    end
  end },
  { "deferred_fp16_step_reads_nothing_between_logged_steps", function()
    -- under fp16 the found-inf flag is not read after each step (the loss
    -- scale lives on the device); a train step reads no tensor outside read_scalars, and the
    -- rows still carry the eager run's loss_scale (the deferred_bf16_and_fp16 case: all bits)
    local Tensor = getmetatable(T.full({ 1 }, 0)).__index
    local item, rs, ts = Tensor.item, Run.read_scalars, Run.train_step
    local in_step, inside, stray = false, false, 0
    Tensor.item = function(t) if in_step and not inside then stray = stray + 1 end return item(t) end
    Run.read_scalars = function(self) inside = true local ok, e = pcall(rs, self) inside = false
      if not ok then error(e, 0) end end
    Run.train_step = function(self) in_step = true local ok, m = pcall(ts, self) in_step = false
      if not ok then error(m, 0) end return m end
    local ok, rows = pcall(case.run, 5, { precision = "fp16", lazy_scalars = true })
    Tensor.item, Run.read_scalars, Run.train_step = item, rs, ts
    assert(ok, tostring(rows))
    assert(stray == 0, ("%d reads in fp16 train steps outside the logged reads"):format(stray))
    assert(#rows == 12 and rows[12].loss_scale == 65536, "rows: loss_scale " .. tostring(rows[12].loss_scale))
  end },
  { "deferred_non_finite_names_its_step", function()
    local fake = setmetatable({ unread = { { row = {}, value = deferred.leaf(T.full({ 1 }, 1.5)), step = 2 },
      { row = {}, value = deferred.leaf(T.full({ 1 }, 0 / 0)), step = 3 },
      { row = {}, value = deferred.leaf(T.full({ 1 }, 2)), step = 4 } },
      recipe = { precision = "fp32", optim = { lr = 1e-3 } }, scaler = require("trainer.train.amp").new_scaler("fp32"),
      step = 4, out = "runs/x" }, Run)
    local ok, err = pcall(Run.read_scalars, fake)
    assert(not ok and tostring(err):find("step 3: the loss is nan", 1, true), tostring(err))
    assert(fake.last_loss == 1.5 and #fake.unread == 0)
  end },
  { "deferred_non_finite_grad_norm_names_its_step", function()
    local norm = deferred.own(T.full({ 1 }, 1 / 0))
    local fake = setmetatable({ unread = { { row = {}, value = deferred.leaf(T.full({ 1 }, 1.5)), step = 2,
        norm = deferred.own(T.full({ 1 }, 0.25)) },
      { row = {}, value = deferred.leaf(T.full({ 1 }, 2)), step = 3, norm = norm },
      { row = {}, value = deferred.leaf(T.full({ 1 }, 2)), step = 4, norm = deferred.own(T.full({ 1 }, 1)) } },
      recipe = { precision = "bf16", optim = { lr = 1e-3 } }, scaler = require("trainer.train.amp").new_scaler("bf16"),
      step = 4, out = "runs/x" }, Run)
    local rows = { fake.unread[1].row }
    local ok, err = pcall(Run.read_scalars, fake)
    assert(not ok and tostring(err):find("step 3: the gradient norm is inf", 1, true), tostring(err))
    assert(rows[1].grad_norm == 0.25 and #fake.unread == 0)
  end },
  { "deferred_arithmetic_is_the_eager_one", function()
    local a, b, w = 2.5226101875305176, 0.3333333432674408, 0.7
    local ta, tb = T.full({ 1 }, a), T.full({ 1 }, b)
    local ea, eb = ta:item(), tb:item()
    local eager = (0 + w * (0.5 * (ea + eb))) / 3
    local v = deferred.div(deferred.add(0, deferred.mul(w, deferred.mul(0.5,
      deferred.add(deferred.leaf(ta), deferred.leaf(tb))))), 3)
    assert(deferred.is(v) and deferred.value(v) == eager)
    assert(deferred.add(1, 2) == 3 and deferred.mul(2, 3) == 6 and deferred.div(6, 4) == 1.5)
    ta:free(); tb:free()
  end },
}
