-- trainer.core.runtime: the process's runtime context (core/ctx/ctx.h) and helpers to turn C
-- statuses into Lua errors. Everything that allocates goes through runtime.ctx.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local errors = require("trainer.core.errors")

local M = {}

M.ctx = C.tr_ctx_new()
if M.ctx == nil then error("trainer: cannot create the runtime context (out of host memory)", 0) end
-- The context lives until the process ends and is deliberately never given to the GC:
-- lua_close() runs finalizers in no particular order, and a tensor finalized after its
-- allocator was destroyed would free into freed memory. The OS reclaims it at exit.

-- Frees the C object obj[field] once with free: its finalizer is dropped first and the
-- field cleared, so neither the GC nor a second call frees it again (nothing when it is nil).
function M.release(obj, field, free)
  local h = obj[field]
  if h ~= nil then
    ffi.gc(h, nil)
    free(h)
    obj[field] = nil
  end
end

-- The last error of the context as a Lua error: "oom" errors exit 2 at the CLI.
-- `what` names the Lua function that made the call ("tensor.full"): it prefixes only
-- internal errors, where it helps a bug report. A user error or out of memory shows the C
-- message alone, which names the device, the size or the file itself: a user never sees
-- trainer's function names ("tensor.full: cuda:0 was asked for ..."), nor the C
-- function's that some C messages begin with for C callers ("tr_tensor_reshape: ...").
function M.raise(what)
  local err = C.tr_ctx_err(M.ctx)
  local msg = ffi.string(err.msg)
  if err.status == C.TR_EOOM or err.status == C.TR_EUSER then
    msg = msg:gsub("^tr_[%w_]+: ", "")
    if err.status == C.TR_EOOM then errors.oom(msg) end
    errors.user("%s", msg)
  end
  if what and what ~= "" then msg = what .. ": " .. msg end
  error(msg, 3)
end

-- Checks a status returned by a C call.
function M.check(status, what)
  if status ~= 0 then M.raise(what) end
end

-- "cpu" -> -1, "cuda" -> 0, "cuda:1" -> 1
function M.parse_device(d)
  if d == nil or d == "cpu" then return C.TR_CPU end
  if type(d) == "number" then return d end
  if d == "cuda" then return 0 end
  local n = type(d) == "string" and d:match("^cuda:(%d+)$")
  if n then return tonumber(n) end
  if d == "auto" then
    if C.tr_cuda_device_count() > 0 then return 0 end
    M.note_unavailable()
    return C.TR_CPU
  end
  errors.user("unknown device %q: use \"cpu\", \"cuda\", \"cuda:N\" or \"auto\"", tostring(d))
end

-- Says once, on stderr, why device = "auto" runs on the CPU when a GPU is there but its driver
-- refused the runtime (older than it): the user asked for the GPU where there is one.
local unavailable_said = false
function M.note_unavailable()
  local why = ffi.string(C.tr_cuda_unavailable_reason())
  if why == "" or unavailable_said then return end
  unavailable_said = true
  io.stderr:write("warning: device = \"auto\" runs on the CPU: ", why, "\n")
end

function M.device_name(index)
  if index < 0 then return "cpu" end
  return "cuda:" .. index
end

-- The CUDA backend's host round trips since the process started (core/cuda_device/host_sync.h):
-- { copies_d2h, stream_syncs, event_syncs, device_syncs, round_trips (their sum),
-- feed_waits (the batch feed's slot waits, not round trips) }; all 0 on the CPU. Take it
-- before and after some work and subtract (trainer.core.runtime.host_syncs_since).
local counts = ffi.new("tr_host_syncs")
local sync_fields = { "copies_d2h", "stream_syncs", "event_syncs", "device_syncs", "feed_waits", "round_trips" }

function M.host_syncs()
  C.tr_host_syncs_get(counts)
  local t = {}
  for _, k in ipairs(sync_fields) do t[k] = tonumber(counts[k]) end
  return t
end

-- The counts made since `before` (a host_syncs() table), field by field.
function M.host_syncs_since(before)
  local now = M.host_syncs()
  for _, k in ipairs(sync_fields) do now[k] = now[k] - before[k] end
  return now
end

-- Raises the user error a device's kernels recorded since the last check (a token id outside
-- the vocabulary, a label that is not a class: core/cuda_device/device_errors.h), if any. One read
-- of the device's error word (a synchronisation): call it where the host waits anyway.
-- Nothing to do on the CPU, whose ops fail at once.
function M.check_device_errors(device)
  local d = M.parse_device(device)
  if d == C.TR_CPU then return end
  M.check(C.tr_device_errors_check(M.ctx, d), "check_device_errors")
end

function M.allocator(device)
  local a = C.tr_ctx_alloc(M.ctx, M.parse_device(device))
  if a == nil then M.raise("device " .. tostring(device or "cpu")) end
  return a
end

return M
