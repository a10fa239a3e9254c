-- tests/cudacpu/harness.lua — what the emulator's Lua tests (tests/cudacpu/test_*.lua) share:
-- `local h = dofile(dir .. "/harness.lua")`, then
--   h.check(name, ok, why)     one PASS/FAIL line, counted
--   h.rel_diff(a, b)           the largest |a - b| / max(1, |b|) over two tensors' values
--   h.sines(n, k)              { sin(k), sin(2k), ..., sin(nk) }: fixed test values in [-1, 1]
--   h.log_ok                   whether this binary has the emulator's launch log
--   h.log_mark()               the launch log's length now
--   h.launches(what, from)     the launches logged since `from` (default 0) whose kernel name has `what`
--   h.finish()                 prints "N passed, M failed" and exits (1 when any failed)
local ffi = require("ffi")

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu"
local h = { passed = 0, failed = 0 }
h.log_ok = dofile(here .. "/../../bench/gpu/launch_log.lua")

function h.check(name, ok, why)
  if ok then h.passed = h.passed + 1; print("PASS " .. name)
  else h.failed = h.failed + 1; print("FAIL " .. name .. ": " .. tostring(why)) end
end

function h.rel_diff(a, b)
  local va, vb = a:to("cpu"):values(), b:to("cpu"):values()
  local worst = 0
  for i = 1, #vb do worst = math.max(worst, math.abs(va[i] - vb[i]) / math.max(1, math.abs(vb[i]))) end
  return worst
end

function h.sines(n, k)
  local v = {}
  for i = 1, n do v[i] = math.sin(i * k) end
  return v
end

function h.log_mark() return tonumber(ffi.C.cudacpu_launch_log_count()) end

function h.launches(what, from)
  local n, rec = 0, ffi.new("struct cudacpu_launch")
  for i = from or 0, ffi.C.cudacpu_launch_log_count() - 1 do
    ffi.C.cudacpu_launch_log_get(i, rec)
    if ffi.string(rec.name):find(what, 1, true) then n = n + 1 end
  end
  return n
end

function h.finish()
  print(("%d passed, %d failed"):format(h.passed, h.failed))
  os.exit(h.failed == 0 and 0 or 1)
end

return h
