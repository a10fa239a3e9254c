-- trainer.dist without mpirun: the sharding of a global batch (every row on
-- exactly one rank, in order; shares weighted so that the mean over ranks is the global
-- batch's gradient, even for a short last batch), the refusal of another world size on
-- resume, the bucket buffers the plan counts, and a world of one whose collectives change
-- nothing. The runs on 2 ranks are tests/cli/test_distributed.sh.
local dist = require("trainer.dist")
local errors = require("trainer.core.errors")

local tests = {}

-- A Dist of `size` ranks as rank `rank`, for its pure methods (no MPI behind it).
local function fake(rank, size)
  return setmetatable({ rank = rank, size = size }, dist.Dist)
end

local function rows(n)
  local b = {}
  for i = 1, n do b[i] = { "text " .. i, i } end
  return b
end

tests.shard_covers_every_row_once_in_order = function()
  for _, case in ipairs({ { 8, 2 }, { 7, 2 }, { 5, 3 }, { 1, 2 }, { 9, 4 } }) do
    local n, N = case[1], case[2]
    local batch, seen, wsum = rows(n), {}, 0
    for r = 0, N - 1 do
      local part, w = fake(r, N):shard(batch)
      for _, row in ipairs(part) do seen[#seen + 1] = row[2] end
      -- rows_r * N / n: the weights of the ranks average to 1
      assert(math.abs(w - #part * N / n) < 1e-12, ("n %d N %d rank %d: weight %g"):format(n, N, r, w))
      wsum = wsum + w
      assert(#part >= math.floor(n / N) and #part <= math.ceil(n / N), "uneven by more than one row")
    end
    assert(#seen == n, ("n %d N %d: %d rows sharded"):format(n, N, #seen))
    for i = 1, n do assert(seen[i] == i, ("n %d N %d: row %d is %s"):format(n, N, i, tostring(seen[i]))) end
    assert(math.abs(wsum / N - 1) < 1e-12, "the mean weight is not 1")
  end
end

tests.even_shard_has_weight_one = function()
  local part, w = fake(1, 2):shard(rows(8))
  assert(#part == 4 and part[1][2] == 5 and w == 1, "rank 1 of 2 takes rows 5..8 with weight 1")
end

tests.resume_with_another_world_size_is_refused = function()
  local dir = "runs/x/checkpoint-6"
  dist.check_resume({ dist = { world_size = 2 } }, 2, dir)   -- same N: fine
  dist.check_resume({}, 1, dir)                              -- single process both times: fine
  local ok, e = pcall(dist.check_resume, { dist = { world_size = 2 } }, 1, dir)
  assert(not ok and errors.is_user_error(e), "another N must be a user error")
  assert(e.msg:find("saved by a run of 2 ranks, and this run has one process", 1, true), e.msg)
  assert(e.msg:find("`mpirun -np 2 trainer resume runs/x`", 1, true), e.msg)
  ok, e = pcall(dist.check_resume, {}, 4, dir)
  assert(not ok and e.msg:find("saved by a run of one process, and this run has 4 ranks", 1, true), tostring(e.msg))
  assert(e.msg:find("`trainer resume runs/x` without mpirun", 1, true), e.msg)
end

tests.bucket_buffers = function()
  local MiB = 2 ^ 20
  -- one bucket holds all: one buffer of the gradients' size
  assert(dist.buffer_bytes(4 * MiB, { bucket = "25MiB" }) == 4 * MiB)
  -- more than one bucket: two buffers of one bucket each
  assert(dist.buffer_bytes(100 * MiB, { bucket = "25MiB" }) == 50 * MiB)
  assert(dist.buffer_bytes(100 * MiB, nil) == 50 * MiB, "the default bucket is 25 MiB")
  -- NCCL reduces in place
  assert(dist.buffer_bytes(100 * MiB, {}, true) == 0)
end

tests.world_of_one_changes_nothing = function()
  local d = fake(0, 1)
  local v = d:agree({ 1.5, 2 })
  assert(v[1] == 1.5 and v[2] == 2)
  d.backend = "none"
  d:allreduce_grads({})   -- no collective, no error
  d:check_in("nothing")
  local part, w = d:shard(rows(3))
  assert(#part == 3 and w == 1)
end

tests.checkpoint_meta_names_every_rank = function()
  local d = fake(0, 2)
  d.backend = "mpi"
  local m = d:checkpoint_meta({ epoch = 1, position = 3, batch_size = 8 })
  assert(m.world_size == 2 and #m.ranks == 2)
  assert(m.ranks[2].rank == 1 and m.ranks[2].slice == 1 and m.ranks[2].position == 3 and m.ranks[2].rows_per_batch == 4)
end

return tests
