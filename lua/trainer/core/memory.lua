-- trainer.core.memory: the memory ledger (README.md, "The memory ledger"). Every figure comes from the
-- caching allocator of a device (default "cpu"; pass "cuda:0" for a GPU).
--   stats()        { allocated, reserved, peak_allocated, peak_reserved,
--                    by_tag = { weights, grads, optimizer, activations, workspace },
--                    peak_by_tag = {...}, counts = {...}, largest_free, inactive_split, limit,
--                    device_memory = { total, free, outside_allocator } on a GPU, nil on the CPU }
--   report()       a human-readable table (per tag and per pool, current and peak)
--   reset_peak(), empty_cache(), snapshot(path) (JSON), set_limit(bytes or "64MiB"),
--   set_max_split_size(bytes or "128MiB")
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local schema = require("trainer.recipe.schema")
local errors = require("trainer.core.errors")

local M = {}

M.tags = { "weights", "grads", "optimizer", "activations", "workspace" }

local function num(x) return tonumber(x) end

function M.stats(device)
  local s = ffi.new("tr_alloc_stats")
  C.tr_alloc_get_stats(runtime.allocator(device), s)
  local by_tag, peak_by_tag = {}, {}
  for i, name in ipairs(M.tags) do
    by_tag[name] = num(s.tag_allocated[i - 1])
    peak_by_tag[name] = num(s.tag_peak[i - 1])
  end
  return {
    allocated = num(s.allocated), reserved = num(s.reserved),
    peak_allocated = num(s.peak_allocated), peak_reserved = num(s.peak_reserved),
    requested = num(s.requested),
    by_tag = by_tag, peak_by_tag = peak_by_tag,
    pools = {
      small = { allocated = num(s.pool_allocated[0]), reserved = num(s.pool_reserved[0]),
                peak_allocated = num(s.pool_peak_allocated[0]), peak_reserved = num(s.pool_peak_reserved[0]) },
      large = { allocated = num(s.pool_allocated[1]), reserved = num(s.pool_reserved[1]),
                peak_allocated = num(s.pool_peak_allocated[1]), peak_reserved = num(s.pool_peak_reserved[1]) },
    },
    counts = { alloc = num(s.n_alloc), free = num(s.n_free), raw_alloc = num(s.n_raw_alloc),
               raw_free = num(s.n_raw_free), retries = num(s.n_retries), ooms = num(s.n_ooms),
               segments = num(s.n_segments), live_blocks = num(s.n_live_blocks) },
    largest_free = num(s.largest_free), inactive_split = num(s.inactive_split),
    limit = num(s.limit),
    device_memory = M.device_memory(device),
  }
end

-- A GPU's own figures beside the allocator's, to match nvidia-smi: { total, free,
-- outside_allocator = total - free - reserved (the CUDA context, cuBLASLt, other processes) },
-- from cudaMemGetInfo; nil on the CPU.
function M.device_memory(device)
  local a = runtime.allocator(device)
  local v = ffi.new("uint64_t[3]")
  if C.tr_alloc_device_memory(a, v, v + 1, v + 2) ~= 0 then return nil end
  return { total = num(v[0]), free = num(v[1]), outside_allocator = num(v[2]) }
end

function M.report(device)
  local a = runtime.allocator(device)
  local need = tonumber(C.tr_alloc_report(a, nil, 0))
  local buf = ffi.new("char[?]", need + 1)
  C.tr_alloc_report(a, buf, need + 1)
  return ffi.string(buf)
end

function M.reset_peak(device) C.tr_alloc_reset_peak(runtime.allocator(device)) end
function M.empty_cache(device) C.tr_alloc_empty_cache(runtime.allocator(device)) end

local function bytes(v, what)
  local n, why = schema.parse_size(v)
  if not n then errors.user("%s: %s", what, why) end
  return n
end

-- 0 or nil removes the limit.
function M.set_limit(limit, device)
  C.tr_alloc_set_limit(runtime.allocator(device), limit and bytes(limit, "memory.set_limit") or 0)
end

function M.set_max_split_size(size, device)
  C.tr_alloc_set_max_split_size(runtime.allocator(device),
    size and bytes(size, "memory.set_max_split_size") or 0)   -- 0: no maximum
end

function M.snapshot(path, device)
  if type(path) ~= "string" then errors.user("memory.snapshot(path): path must be a string") end
  local err = ffi.new("tr_error")
  local rc = C.tr_alloc_snapshot(runtime.allocator(device), path, err)
  if rc ~= 0 then errors.user("%s", ffi.string(err.msg)) end
  return path
end

M.format_size = schema.format_size

return M
