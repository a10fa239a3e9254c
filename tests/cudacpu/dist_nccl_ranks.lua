-- tests/cudacpu/dist_nccl_ranks.lua — one rank of core/dist's NCCL path (dist_nccl.c) driven
-- through the FFI, for tests/cudacpu/dist_nccl.sh:
--   mpirun -np 2 TRAINER run tests/cudacpu/dist_nccl_ranks.lua CASE
-- Each rank joins the job (tr_dist_init), switches to NCCL on cuda:<rank> (tr_dist_use_nccl:
-- the id broadcast over MPI, the agreed set-up) and prints one line "rank R: ok ..." or
-- "rank R: error <message>" per check; the script reads the lines. Cases:
--   values  three gradients in 8 KiB buckets, two of them last written by a kernel on the
--           compute stream, at once and overlapped (begin, ready, finish): the mean over both
--           ranks, bitwise, and the buckets counted;
--   hang    rank 1 stops answering (sleeps past CUDACPU_NCCL_TIMEOUT) before its all-reduce:
--           rank 0's all-reduce must fail, naming the rank, never return NaN gradients as
--           done; a second all-reduce must say that the communicator was aborted.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")
local runtime = require("trainer.core.runtime")

local case = arg and arg[1] or error("usage: trainer run dist_nccl_ranks.lua values|hang", 0)
local ctx = runtime.ctx
local out = ffi.new("tr_dist *[1]")
assert(C.tr_dist_init(ctx, 30, out) == 0, ffi.string(C.tr_ctx_errmsg(ctx)))
local d = out[0]
local rank = C.tr_dist_rank(d)
local function say(fmt, ...) io.write(("rank %d: " .. fmt .. "\n"):format(rank, ...)) io.flush() end
local function errmsg() return ffi.string(C.tr_ctx_errmsg(ctx)) end

if C.tr_dist_use_nccl(d, ctx, rank) ~= 0 then
  say("error %s", errmsg())
  C.tr_dist_free(d)
  os.exit(1)
end

-- gradient i of rank r: values that halve exactly, so the mean is exact in any order. The
-- last two are uploaded as gradient 1's values and then filled on the compute stream (a
-- kernel queued there, not yet run in deferred mode): the all-reduce must wait for it.
local sizes = { 1000, 37, 4096 }
local fills = { nil, function(r) return r + 1 end, function(r) return (r + 1) * 0.25 end }
local function grad_values(r, i, uploaded)
  local v = {}
  for k = 1, sizes[i] do v[k] = (fills[i] and not uploaded) and fills[i](r) or (k % 13 - 6) * 0.25 + r * 0.5 + i end
  return v
end
local function grads()
  local list, arr = {}, ffi.new("tr_tensor *[?]", #sizes)
  for i = 1, #sizes do
    list[i] = T.from_table(grad_values(rank, i, true), { device = "cuda:" .. rank })
    if fills[i] then list[i]:fill(fills[i](rank)) end
    arr[i - 1] = list[i]:ptr()
  end
  return list, arr
end
local function check_mean(list, what)
  for i = 1, #sizes do
    local a, b, got = grad_values(0, i), grad_values(1, i), list[i]:values()
    for k = 1, sizes[i] do
      if got[k] ~= (a[k] + b[k]) / 2 then
        say("error %s: gradient %d element %d is %s, the mean is %s", what, i, k, tostring(got[k]), (a[k] + b[k]) / 2)
        return
      end
    end
  end
  say("ok %s", what)
end

if case == "values" then
  local stats = ffi.new("tr_dist_stats")
  local list, arr = grads()
  if C.tr_dist_allreduce_grads(d, ctx, arr, #sizes, 8192) ~= 0 then say("error %s", errmsg()) else check_mean(list, "at once") end
  C.tr_dist_get_stats(d, stats)
  say("ok buckets %d", tonumber(stats.buckets))
  list, arr = grads()
  local st = C.tr_dist_grads_begin(d, ctx, arr, #sizes, 8192)
  if st == 0 then st = C.tr_dist_grads_ready(d, ctx, 2) end
  if st == 0 then st = C.tr_dist_grads_finish(d, ctx) end
  if st ~= 0 then say("error %s", errmsg()) else check_mean(list, "overlapped") end
  C.tr_dist_get_stats(d, stats)
  say("ok overlapped buckets %d", tonumber(stats.buckets_overlapped))
elseif case == "hang" then
  local list, arr = grads()
  if rank == 1 then
    pcall(ffi.cdef, "unsigned int sleep(unsigned int);")
    ffi.C.sleep(4)
  end
  if C.tr_dist_allreduce_grads(d, ctx, arr, #sizes, 8192) ~= 0 then
    say("error %s", errmsg())
    if C.tr_dist_allreduce_grads(d, ctx, arr, #sizes, 8192) ~= 0 then say("error again %s", errmsg())
    else say("ok again: a second all-reduce on an aborted communicator returned 0") end
  else
    local v = list[1]:values()[1]
    say("ok done (an all-reduce that returned 0), first element %s", (v == nil or v ~= v) and "NaN" or tostring(v))
  end
else
  error("no case " .. case, 0)
end
C.tr_dist_free(d)
