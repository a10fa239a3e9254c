-- data.sampler = "group_by_label" (trainer.train.data, Loader:_grouped): batches as
-- sentence-transformers' GroupByLabelBatchSampler makes them — pairs of rows of one label,
-- several labels per batch, labels with a single row left out, the last short batch kept
-- from 4 rows; seeded, the same on a second loader, different next epoch; resume; errors.
local data = require("trainer.train.data")
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

-- 37 rows: labels 0..3 with 9, 8, 11, 8 rows and label 9 once (left out); texts unique.
local function fixture()
  local dir = lib.tmpdir()
  local counts = { [0] = 9, 8, 11, 8 }
  local lines, k = {}, 0
  for y = 0, 3 do
    for _ = 1, counts[y] do
      k = k + 1
      lines[#lines + 1] = ('{"text": "t%d", "label": %d}'):format(k, y)
    end
  end
  lines[#lines + 1] = '{"text": "lonely", "label": 9}'
  lib.write(dir .. "/rows.jsonl", table.concat(lines, "\n") .. "\n")
  return dir .. "/rows.jsonl"
end

local path = fixture()

local function loader(B, opts)
  local ds = data.open(path, { columns = { "text", "label" } }, { seed = 11 })
  local o = { batch_size = B, seed = 11, group_by_label = true }
  for k, v in pairs(opts or {}) do o[k] = v end
  return ds:loader(o), ds
end

local function epoch(ld)
  local out = {}
  for b in ld:batches() do out[#out + 1] = b end
  return out
end

local function sig(batches)
  local s = {}
  for _, b in ipairs(batches) do
    local t = {}
    for _, r in ipairs(b) do t[#t + 1] = r[1] end
    s[#s + 1] = table.concat(t, ",")
  end
  return table.concat(s, "|")
end

return {
  { "batches_hold_pairs_of_labels", function()
    local ld = loader(8)
    local batches = epoch(ld)
    -- pairs per label: 4 + 4 + 5 + 4 = 17 pairs = 34 rows; rounds stop when one label is left:
    -- the second largest label count caps the others (4 pairs), so 16 pairs = 32 rows = 4 batches
    assert(#batches == 4, "batches: " .. #batches)
    assert(ld:batches_per_epoch() == 4)
    local seen = {}
    for _, b in ipairs(batches) do
      assert(#b == 8, "batch of " .. #b)
      local per = {}
      for i = 1, #b, 2 do
        assert(b[i][2] == b[i + 1][2], "a pair of one label")
        assert(b[i][2] ~= 9, "a label with one row is left out")
      end
      for _, r in ipairs(b) do
        assert(not seen[r[1]], "row twice in an epoch: " .. r[1])
        seen[r[1]] = true
        per[r[2]] = (per[r[2]] or 0) + 1
      end
      local labels = 0
      for _ in pairs(per) do labels = labels + 1 end
      assert(labels >= 2, "several labels per batch")
    end
  end },
  { "short_last_batch_kept_from_4_rows", function()
    local batches = epoch(loader(6))
    -- 32 rows into batches of 6: five full, one of 2 (dropped: under 4 rows)
    assert(#batches == 5, "batches: " .. #batches)
    assert(#epoch(loader(10)) == 3, "32 rows into batches of 10: the last 2 rows dropped")
    local dropped = epoch(loader(12, { drop_last = true }))
    assert(#dropped == 2, "drop_last: " .. #dropped)
    local kept = epoch(loader(12))
    assert(#kept == 3 and #kept[3] == 8, "last batch of 8 rows kept")
  end },
  { "seeded_and_resumable", function()
    local a, b = loader(8), loader(8)
    local ea = sig(epoch(a))
    assert(ea == sig(epoch(b)), "same seed, same batches")
    local second = sig(epoch(a))
    assert(second ~= ea, "the next epoch has another order")
    local c = loader(8)
    c:next()
    c:next()
    local st = c:state()
    local rest = {}
    for x in c:batches() do rest[#rest + 1] = x end
    local d = loader(8)
    d:restore(st)
    local rest2 = {}
    for x in d:batches() do rest2[#rest2 + 1] = x end
    assert(sig(rest) == sig(rest2) and #rest == 2, "resume gives the same remaining batches")
  end },
  { "errors_name_the_problem", function()
    local msg = lib.user_error(function() epoch(loader(7)) end)
    assert(msg:find("even number >= 4", 1, true), msg)
    msg = lib.user_error(function() epoch(loader(2)) end)
    assert(msg:find("even number >= 4", 1, true), msg)
    local dir = lib.tmpdir()
    lib.write(dir .. "/one.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1}\n{"text": "c", "label": 2}\n')
    local ds = data.open(dir .. "/one.jsonl", { columns = { "text", "label" } }, { seed = 1 })
    msg = lib.user_error(function() epoch(ds:loader({ batch_size = 4, group_by_label = true })) end)
    assert(msg:find("at least 2 labels", 1, true), msg)
  end },
  { "recipe_key_selects_it", function()
    local ds, ld = data.train({ data = { train = path, columns = { "text", "label" }, sampler = "group_by_label" },
      loss = { name = "batch_hard_triplet" }, batch = { size = 8 }, model = { from = "x" } })
    assert(ld.group_by_label == true and #epoch(ld) == 4)
    ds:close()
  end },
}
