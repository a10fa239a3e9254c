-- trainer.dist: data-parallel training, the semantics of PyTorch DDP, over core/dist (MPI for
-- the launch and CPU collectives, NCCL for GPU ones). `mpirun -np N trainer RECIPE.lua`
-- starts N ranks; each builds the same run and joins here.
--
--   local d = dist.setup(recipe)    -- nil for a single process (not under mpirun, no key)
--   d.rank, d.size, d.local_rank, d.backend ("mpi" | "nccl" | "none"), d:is_root()
--   d:device(name)                  -- "cuda" -> "cuda:<local rank>" (one GPU per rank)
--   d:broadcast_params(list)        -- rank 0's weights on every rank
--   d:shard(batch)                  -- this rank's rows of a global batch, and its weight
--   d:allreduce_grads(list)         -- mean over ranks, in buckets
--   d:begin_grads(list, model)      -- the same, overlapped with the backward that follows:
--   d:finish_grads()                --   buckets start as encoder layers finish (DDP)
--   d:agree({ ... })                -- sums over ranks of a few numbers (loss, flags)
--   d:check_in(where)               -- barrier that names a missing rank
--   dist.exit(status)               -- at the end of the process: finalize, or abort the job
--
-- Sharding: the loader reads global batches of batch.size x N rows (every rank the same, as
-- every rank shuffles with the same seed); rank r takes rows r*B+1 .. (r+1)*B. A short last
-- batch is split as evenly as it goes, and each rank's gradient is weighted by its share
-- (rows_r * N / rows), so that the mean over ranks is the gradient of the whole batch: the
-- step equals the single-process step on the global batch. Losses with in-batch negatives
-- (mnrl) see only the rank's own rows as negatives, as in DDP.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local errors = require("trainer.core.errors")
local runtime = require("trainer.core.runtime")

local M = {}

local Dist = {}
Dist.__index = Dist
M.Dist = Dist

M.DEFAULT_TIMEOUT = 300
M.DEFAULT_BUCKET = 25 * 1024 * 1024

-- The job this process belongs to (one per process: MPI is initialised once).
local current = nil

function M.current() return current end

local function bucket_bytes(spec)
  local b = spec and spec.bucket
  if b == nil then return M.DEFAULT_BUCKET end
  local n = require("trainer.recipe.schema").parse_size(b)
  return n or M.DEFAULT_BUCKET
end

-- Joins the job when this process was launched by mpirun (or the recipe has a
-- `distributed` table); nil otherwise (a plain single-process run: no hook does anything).
function M.setup(recipe)
  if current then return current end
  local spec = recipe.distributed
  local launched = C.tr_dist_launched_size()
  if launched == 0 and not spec then return nil end
  if C.tr_dist_have_mpi() == 0 then
    if launched > 1 then
      errors.user("this process was started by mpirun as one of %d ranks, but this build of trainer has no MPI. "
        .. "Install Open MPI (scripts/deps.sh, or apt-get install openmpi-bin libopenmpi-dev) and rebuild with make; "
        .. "or run one process, without mpirun.", launched)
    end
    errors.user("distributed: this build of trainer has no MPI, so the recipe's `distributed` table cannot be used. "
      .. "Install Open MPI (scripts/deps.sh, or apt-get install openmpi-bin libopenmpi-dev) and rebuild with make; or "
      .. "remove `distributed` from the recipe to train in one process.")
  end
  spec = spec or {}
  local out = ffi.new("tr_dist *[1]")
  runtime.check(C.tr_dist_init(runtime.ctx, spec.timeout or M.DEFAULT_TIMEOUT, out), "dist.setup")
  local d = setmetatable({ ptr = out[0], spec = spec, bucket = bucket_bytes(spec), backend = "none" }, Dist)
  d.rank, d.size, d.local_rank = C.tr_dist_rank(d.ptr), C.tr_dist_size(d.ptr), C.tr_dist_local_rank(d.ptr)
  d.timeout = spec.timeout or M.DEFAULT_TIMEOUT
  d.overlap = spec.overlap ~= false
  current = d
  return d
end

function Dist:is_root() return self.rank == 0 end

-- One GPU per rank: "cuda" (or "auto" resolved to cuda) becomes cuda:<local rank>; a
-- device the recipe names exactly ("cuda:1", "cpu") stays.
function Dist:device(name, requested)
  if name:match("^cuda") and (requested == nil or requested == "auto" or requested == "cuda") then
    local n = C.tr_cuda_device_count()
    if n > 0 then name = "cuda:" .. (self.local_rank % n) end
  end
  self.device_name = name
  return name
end

-- Picks the collective: "auto" is NCCL when every rank trains on a GPU (and NCCL loads),
-- MPI otherwise; "nccl" on a CPU rank is refused.
function Dist:choose_backend()
  local want = self.spec.backend or "auto"
  local on_gpu = self.device_name and self.device_name:match("^cuda") and 1 or 0
  local flags = ffi.new("double[1]", on_gpu)
  self:_check(C.tr_dist_allreduce_sum_f64(self.ptr, runtime.ctx, flags, 1, "the choice of the backend"))
  local all_gpu = flags[0] == self.size
  if want == "nccl" and not all_gpu then
    errors.user("distributed.backend = \"nccl\": every rank must train on a GPU, but %d of %d ranks are on the CPU; "
      .. "use backend = \"mpi\" (or \"auto\")", self.size - flags[0], self.size)
  end
  -- one rank uses NCCL only when asked (backend = "nccl": the GPU check of its path)
  if want ~= "mpi" and all_gpu and (want == "nccl" or (self.size > 1 and C.tr_dist_have_nccl() == 1)) then
    local dev = runtime.parse_device(self.device_name)
    local st = C.tr_dist_use_nccl(self.ptr, runtime.ctx, dev)
    if st == 0 then self.backend = "nccl" return self.backend end
    -- the set-up is agreed (core/dist/dist_nccl.c): every rank failed, and each says why
    if want == "nccl" then
      self:agree_to_fail()
      runtime.check(st, "dist.use_nccl")
    end
  end
  self.backend = self.size > 1 and "mpi" or "none"
  return self.backend
end

-- A failed collective: raise its message (naming the rank) as a user error.
function Dist:_check(status)
  if status ~= 0 then runtime.raise("distributed") end
end

-- The step's all-reduce told every rank to fail (a non-finite loss): exit then ends the job
-- without an abort, after each rank's message.
function Dist:agree_to_fail() self.agreed_failure = true end

function Dist:check_in(where)
  if self.size == 1 then return end
  self:_check(C.tr_dist_check_in(self.ptr, runtime.ctx, where))
end

-- Rank 0's values of every parameter (trainable or frozen) on every rank, as DDP does at
-- construction: identical starting weights whatever each rank's initialisation did.
function Dist:broadcast_params(list)
  if self.size == 1 then return end
  self:check_in("the broadcast of the initial weights")
  for _, e in ipairs(list) do
    local p = e[2]
    self:_check(C.tr_dist_broadcast(self.ptr, runtime.ctx, p.value:ptr(), 0))
  end
end

-- This rank's rows of a global batch (rows 1..n), and the weight of its gradient
-- (rows_r * N / n: 1 when the batch divides evenly). An empty shard has weight 0.
function Dist:shard(batch)
  local n, N, r = #batch, self.size, self.rank
  local base, extra = math.floor(n / N), n % N
  local first = r * base + math.min(r, extra) + 1
  local count = base + (r < extra and 1 or 0)
  local rows = {}
  for i = first, first + count - 1 do rows[#rows + 1] = batch[i] end
  return rows, count * N / n
end

-- The gradients of the trainable parameters, averaged over the ranks (no-op for one).
function Dist:allreduce_grads(list)
  if self.size == 1 and self.backend ~= "nccl" then return end
  self:check_in("the gradient all-reduce")
  local grads = {}
  for _, e in ipairs(list) do
    local p = e[2]
    if p.grad and p.trainable ~= false then grads[#grads + 1] = p.grad end
  end
  if #grads == 0 then return end
  local arr = ffi.new("tr_tensor *[?]", #grads)
  for i, g in ipairs(grads) do arr[i - 1] = g:ptr() end
  self:_check(C.tr_dist_allreduce_grads(self.ptr, runtime.ctx, arr, #grads, self.bucket))
end

-- The overlapped all-reduce (DDP). begin_grads, before the backward of the step's last
-- micro-batch, lists the gradients (as allreduce_grads) and gives every encoder layer of
-- model an on_grads_final hook; after each layer's backward (in reverse layer order, with or
-- without checkpointing, whose recompute runs inside the segment's backward) the hook tells
-- core/dist the longest suffix of the list that is final, and the buckets lying in it are
-- issued at once. What comes after the encoder in parameter order (pooler, head, the loss's
-- own parameters) is back-propagated before the encoder, so it is final at the first hook;
-- the embeddings, first in order, are final only when backward ends: their bucket starts in
-- finish_grads, which waits for every bucket. Without model (GradCache's several backwards
-- per micro-batch, or distributed.overlap = false) every bucket starts in finish_grads.
-- The buckets are the same either way, so are the results. Every rank makes the same calls.
function Dist:begin_grads(list, model)
  if self.size == 1 and self.backend ~= "nccl" then return end
  if self.pending then self:finish_grads() end   -- a step that failed in between
  self:check_in("the gradient all-reduce")
  local grads, index = {}, {}
  for _, e in ipairs(list) do
    local p = e[2]
    if p.grad and p.trainable ~= false then
      grads[#grads + 1] = p.grad
      index[p] = #grads - 1
    end
  end
  self.pending = { start_s = self:stats().allreduce_s, grads = grads }
  if #grads == 0 then return end
  local arr = ffi.new("tr_tensor *[?]", #grads)
  for i, g in ipairs(grads) do arr[i - 1] = g:ptr() end
  self:_check(C.tr_dist_grads_begin(self.ptr, runtime.ctx, arr, #grads, self.bucket))
  if model and self.overlap then self:_hook_layers(model, index, #grads) end
end

-- Gives each encoder layer of model (its family's layers, trainer.models.registry) the hook
-- that reports its gradients final (above).
function Dist:_hook_layers(model, index, n)
  local layers, top = {}, -1
  local family = require("trainer.models.registry").of_model(model)
  for _, m in ipairs(family and family.layers(model) or {}) do
    local idx = {}
    for _, p in m:parameters() do
      if index[p] then
        idx[#idx + 1] = index[p]
        top = math.max(top, index[p])
      end
    end
    layers[#layers + 1] = { m, idx }
  end
  if #layers == 0 then return end
  local final, ready = {}, n   -- ready: where the final suffix of the list starts (0-based)
  for i = top + 1, n - 1 do final[i] = true end   -- after the encoder: back-propagated first
  for _, l in ipairs(layers) do
    l[1].on_grads_final = function()
      for _, i in ipairs(l[2]) do final[i] = true end
      while ready > 0 and final[ready - 1] do ready = ready - 1 end
      self:_check(C.tr_dist_grads_ready(self.ptr, runtime.ctx, ready))
    end
  end
  self.pending.layers = layers
end

-- Removes the layers' hooks (after the backward they were for).
function Dist:unhook()
  local layers = self.pending and self.pending.layers
  if not layers then return end
  for _, l in ipairs(layers) do l[1].on_grads_final = nil end
  self.pending.layers = nil
end

-- Waits for every bucket of begin_grads: the gradients are the mean over ranks. Returns the
-- seconds this step spent inside the all-reduce (issuing, testing, waiting), or nil when no
-- begin_grads is pending.
function Dist:finish_grads()
  local pending = self.pending
  if not pending then return nil end
  self:unhook()
  self.pending = nil
  if #pending.grads > 0 then self:_check(C.tr_dist_grads_finish(self.ptr, runtime.ctx)) end
  return self:stats().allreduce_s - pending.start_s
end

-- Sums over ranks of the numbers in list (in place; returned).
function Dist:agree(list, where)
  if self.size == 1 then return list end
  local buf = ffi.new("double[?]", #list)
  for i, v in ipairs(list) do buf[i - 1] = v end
  self:_check(C.tr_dist_allreduce_sum_f64(self.ptr, runtime.ctx, buf, #list, where or "the step's loss and flags"))
  for i = 1, #list do list[i] = tonumber(buf[i - 1]) end
  return list
end

-- { allreduce_s, check_in_s, bytes, calls, buckets, buckets_overlapped, buffer_bytes }
function Dist:stats()
  local s = ffi.new("tr_dist_stats")
  C.tr_dist_get_stats(self.ptr, s)
  return { allreduce_s = s.allreduce_seconds, check_in_s = s.check_in_seconds, bytes = tonumber(s.allreduce_bytes),
    calls = tonumber(s.allreduce_calls), buckets = tonumber(s.buckets),
    buckets_overlapped = tonumber(s.buckets_overlapped), buffer_bytes = tonumber(s.buffer_bytes) }
end

-- summary.json's `distributed`: the job, the all-reduce's cost on this rank, and every
-- rank's peak memory (gathered: each rank fills its own slot of a sum), so the ledger shows
-- all ranks, collective buffers included (tag workspace). Every rank must call it.
function Dist:summary(peak_allocated, peak_reserved)
  local N = self.size
  local v = {}
  for i = 1, 2 * N do v[i] = 0 end
  v[self.rank + 1], v[N + self.rank + 1] = peak_allocated, peak_reserved
  self:agree(v, "the gathering of every rank's peak memory")
  local ranks = {}
  for r = 0, N - 1 do ranks[r + 1] = { rank = r, peak_allocated = v[r + 1], peak_reserved = v[N + r + 1] } end
  local st = self:stats()
  return { world_size = N, backend = self.backend, bucket_bytes = self.bucket, allreduce_s = st.allreduce_s,
           allreduce_bytes = st.bytes, allreduce_calls = st.calls, buckets = st.buckets,
           buckets_overlapped = st.buckets_overlapped, overlap = self.overlap, collective_buffer_bytes = st.buffer_bytes,
           check_in_s = st.check_in_s, ranks = ranks }
end

-- What a checkpoint records of the job: the world size and each rank's data cursor (the
-- global batch cursor of the loader, and which slice of each global batch is the rank's).
function Dist:checkpoint_meta(cursor)
  local ranks = {}
  for r = 0, self.size - 1 do
    ranks[r + 1] = { rank = r, epoch = cursor.epoch, position = cursor.position, slice = r,
                     rows_per_batch = math.floor(cursor.batch_size / self.size) }
  end
  return { world_size = self.size, backend = self.backend, ranks = ranks }
end

-- A checkpoint continues exactly only with the world size that wrote it (the global batch,
-- the shards and the dropout masks depend on it): another one is refused, saying what works.
function M.check_resume(meta, now, dir)
  local saved = type(meta.dist) == "table" and tonumber(meta.dist.world_size) or 1
  now = now or 1
  if saved == now then return end
  local function ranks(n) return n == 1 and "one process" or (n .. " ranks") end
  local run = dir:gsub("/checkpoint%-%d+/*$", "")
  errors.user("resume: %s was saved by a run of %s, and this run has %s. A run resumes exactly only with the number "
    .. "of ranks that saved it: %s. To go on with %s, start a new run from that checkpoint's weights (model.from = "
    .. "\"%s\" for a full fine-tune) instead of resuming.", dir, ranks(saved), ranks(now),
    saved == 1 and ("`trainer resume " .. run .. "` without mpirun")
      or ("`mpirun -np " .. saved .. " trainer resume " .. run .. "`"), ranks(now), dir)
end

-- Bytes of the collective buffers for trainable gradients of grad_bytes (the plan's and
-- the ledger's "collective buffers" line).
function M.buffer_bytes(grad_bytes, spec, nccl)
  return tonumber(C.tr_dist_buffer_bytes(grad_bytes, bucket_bytes(spec), nccl and 1 or 0))
end

-- The end of the process (trainer.cli): a clean exit finalizes MPI; a failure on any rank
-- ends every rank at once (MPI_Abort), so that no rank waits for one that has gone.
function M.exit(status)
  local d = current
  if not d then return status end
  current = nil
  io.stdout:flush()
  io.stderr:flush()
  if status ~= 0 and status ~= 130 and d.size > 1 then
    -- A failure every rank agreed on (a non-finite loss seen by the step's all-reduce) ends
    -- every rank the same way: each has printed its message; meet once more (briefly) and
    -- finalize, so that no rank is killed before its message is out. Any other failure
    -- (one rank's error) aborts the job, which is what ends the others.
    C.tr_dist_set_timeout(d.ptr, 10)
    if not (d.agreed_failure and C.tr_dist_check_in(d.ptr, runtime.ctx, "the agreed stop") == 0) then
      C.tr_dist_abort(d.ptr, status)
    end
  end
  C.tr_dist_free(d.ptr)
  return status
end

return M
