-- trainer.train.data: datasets over the real STS-B / SNLI files and the fixtures in
-- tests/data/data/, malformed lines, label maps, NLI triplets, seeded shuffling, exact
-- resume, bucketing, no-duplicate batches and bounded memory over a 200k-line gzip file.
-- The shared collection is looked for at ../shared/data (from the project root) or
-- $TRAINER_SHARED_DATA; cases that need it print SKIP when it is absent.
local data = require("trainer.train.data")
local native = require("trainer.native")
local C = require("trainer.core.ffi")
local ffi = require("ffi")

local root = native.root()
local FIX = root .. "/tests/data/data/"
local lib = dofile(root .. "/tests/lua/testlib.lua")
local exists, user_error = lib.exists, lib.user_error

local function shared(name)
  for _, dir in ipairs({ root .. "/../shared/data", os.getenv("TRAINER_SHARED_DATA") or "" }) do
    if dir ~= "" and exists(dir .. "/" .. name) then return dir .. "/" .. name end
  end
  print("SKIP " .. name .. ": not found in ../shared/data or $TRAINER_SHARED_DATA")
  return nil
end

local function stsb_train()
  local p = root .. "/data/stsb_train.jsonl.gz"
  if exists(p) then return p end
  return shared("stsb_train.jsonl.gz")
end


local function has(s, sub) assert(s:find(sub, 1, true), ("%q not in: %s"):format(sub, s)) end

local function all_batches(ld)
  local out = {}
  for b in ld:batches() do out[#out + 1] = b end
  return out
end

local function key(row) return table.concat(row, "\1", 1, 2) end

local function tmpname(suffix)
  return os.tmpname() .. suffix
end

return {
  -- ------------------------------------------------------------ real files
  { "stsb_train_rows_and_epochs", function()
    local p = stsb_train()
    if not p then return end
    local ds = data.open(p, { columns = { "sentence1", "sentence2", "score" } }, { seed = 42 })
    assert(ds.n == 5749 and ds.gzip and ds.skipped == 0 and ds.target, ds.n)
    local ld = ds:loader { batch_size = 16, seed = 42 }
    assert(ld:batches_per_epoch() == 360)
    local e0 = all_batches(ld)
    assert(#e0 == 360 and #e0[360] == 5749 - 359 * 16, #e0)
    local seen, n = {}, 0
    for _, b in ipairs(e0) do
      for _, row in ipairs(b) do
        assert(type(row[1]) == "string" and type(row[2]) == "string" and type(row[3]) == "number")
        assert(row[3] >= 0 and row[3] <= 5)
        seen[key(row)] = (seen[key(row)] or 0) + 1
        n = n + 1
      end
    end
    assert(n == 5749)
    local distinct = 0
    for _ in pairs(seen) do distinct = distinct + 1 end
    assert(distinct >= 5749 - 43, distinct)          -- the source repeats 43 pairs
    assert(ld.epoch == 1 and ld.position == 0)
    local e1 = all_batches(ld)
    assert(#e1 == 360 and key(e1[1][1]) ~= key(e0[1][1]), "a new epoch is a new order")
    -- same seed: same order on a fresh loader
    local again = ds:loader { batch_size = 16, seed = 42 }
    local b = again:next()
    for i = 1, 16 do assert(key(b[i]) == key(e0[1][i])) end
    -- another seed: another order
    local other = ds:loader { batch_size = 16, seed = 7 }:next()
    assert(key(other[1]) ~= key(e0[1][1]) or key(other[2]) ~= key(e0[1][2]))
    -- pinned: the seed-42 order must not change between versions or machines (resume of old runs)
    assert(e0[1][1][1] == "A girl in a purple shirt and pink headband posing", e0[1][1][1])
    assert(e0[1][16][1] == "Police attacked in Belfast flag protests", e0[1][16][1])
    local unshuffled = ds:loader { batch_size = 4, shuffle = false }:next()
    assert(unshuffled[1][1] == "A plane is taking off." and unshuffled[1][3] == 5.0)
    ds:close()
  end },

  { "stsb_default_columns_and_summary", function()
    local p = stsb_train()
    if not p then return end
    local ds = data.open(p, { max_rows = 100 })
    assert(ds.columns[1] == "sentence1" and ds.columns[3] == "score" and ds.n == 100)
    local s = ds:summary()
    assert(s.rows == 100 and s.skipped == 0 and s.format == "jsonl" and s.gzip == true)
  end },

  { "snli_nli_triplets", function()
    local p = shared("snli_dev.jsonl.gz")
    if not p then return end
    local ds = data.open(p, { build = "nli_triplets" }, { seed = 1 })
    assert(ds.n > 1000 and ds.n % 2 == 0 and ds.ntexts == 3 and not ds.target, ds.n)
    -- every triplet is (s, entailment partner, contradiction partner) or (partner, s, ...)
    local ent, con = {}, {}
    local raw = data.open(p, { columns = { "premise", "hypothesis", "label" },
                               label_map = { entailment = "e", neutral = "n", contradiction = "c" } })
    for row in raw:iter() do
      local t = row[3] == "e" and ent or row[3] == "c" and con or nil
      if t then
        t[row[1] .. "\1" .. row[2]] = true
        t[row[2] .. "\1" .. row[1]] = true
      end
    end
    for i = 1, ds.n, 2 do
      local a, b = ds.items[i], ds.items[i + 1]
      assert(ent[a[1] .. "\1" .. a[2]] and con[a[1] .. "\1" .. a[3]], "triplet " .. i)
      assert(b[2] == a[1] and ent[b[2] .. "\1" .. b[1]] and con[b[2] .. "\1" .. b[3]], "triplet " .. i + 1)
    end
    local ds2 = data.open(p, { build = "nli_triplets" }, { seed = 1 })
    for i = 1, ds.n do assert(ds.items[i][2] == ds2.items[i][2] and ds.items[i][3] == ds2.items[i][3]) end
  end },

  -- ------------------------------------------------------------ malformed lines
  { "malformed_jsonl_line3_names_file_and_line", function()
    local p = FIX .. "bad_line3.jsonl.gz"
    local msg = user_error(function() data.open(p, { columns = { "sentence1", "sentence2", "score" } }) end)
    has(msg, p .. ": line 3: invalid JSON (")
    has(msg, "data.skip_bad")
  end },

  { "skip_bad_counts", function()
    local ds = data.open(FIX .. "bad_line3.jsonl.gz", { columns = { "sentence1", "sentence2", "score" }, skip_bad = true })
    assert(ds.n == 3 and ds.skipped == 1, ds.n .. " " .. ds.skipped)
    has(ds.bad[1], "line 3: invalid JSON")
    assert(ds:summary().skipped == 1)
    local rows = {}
    for b in ds:loader { batch_size = 2, seed = 3 }:batches() do for _, r in ipairs(b) do rows[#rows + 1] = r end end
    assert(#rows == 3)
    for _, r in ipairs(rows) do assert(r[1] ~= "Broken") end
  end },

  { "missing_field_and_wrong_type", function()
    local msg = user_error(function()
      data.open(FIX .. "missing_field.jsonl", { columns = { "premise", "hypothesis", "label" },
                                                label_map = { entailment = 0, neutral = 1, contradiction = 2 } })
    end)
    has(msg, FIX .. "missing_field.jsonl: line 3: field 'hypothesis' is missing")
    msg = user_error(function() data.open(FIX .. "score_string.jsonl", { columns = { "sentence1", "sentence2", "score" } }) end)
    has(msg, "score_string.jsonl: line 3: field 'score' is a string, expected a number")
    msg = user_error(function() data.open(FIX .. "score_string.jsonl", { columns = { "score", "sentence1" } }) end)
    has(msg, "line 1: field 'score' is a number, expected a string")
  end },

  { "tsv_field_count_and_skip", function()
    local p = FIX .. "bad_fields.tsv"
    local msg = user_error(function() data.open(p, { columns = { "sentence1", "sentence2", "score" } }) end)
    has(msg, p .. ": line 3: 2 fields, but the header has 3 (sentence1, sentence2, score)")
    local ds = data.open(p, { columns = { "sentence1", "sentence2", "score" }, skip_bad = true })
    assert(ds.n == 2 and ds.skipped == 1)
    local rows = {}
    for b in ds:loader { batch_size = 1, seed = 8 }:batches() do rows[#rows + 1] = b[1] end
    assert(#rows == 2 and rows[1][3] + rows[2][3] == 3)
  end },

  { "jsonl_crlf_bom_blank_lines", function()
    local ds = data.open(FIX .. "crlf_bom.jsonl", {})
    assert(ds.n == 3 and ds.columns[1] == "anchor" and ds.columns[2] == "positive" and not ds.target)
    local got = {}
    for r in ds:iter() do got[#got + 1] = r[1] .. "=" .. r[2] end
    assert(table.concat(got, ",") == "a1=p1,a2=p2,a3=p3", table.concat(got, ","))
  end },

  { "eval_from_recipe", function()
    local p = root .. "/data/stsb_dev.jsonl.gz"
    if not exists(p) then p = shared("stsb_dev.jsonl.gz") end
    if not p then return end
    local ds = data.eval({ data = { eval = p } })
    assert(ds.n == 1500 and ds.columns[3] == "score" and ds.target)
    local n, sum = 0, 0
    for r in ds:iter() do n = n + 1 sum = sum + r[3] end
    assert(n == 1500 and math.abs(sum / n - 2.36) < 0.01, sum / n)
  end },

  { "label_map_tsv", function()
    local p = FIX .. "pairs.tsv"
    local ds = data.open(p, { columns = { "premise", "hypothesis", "label" },
                              label_map = { entailment = 0, neutral = 1, contradiction = 2 } })
    assert(ds.n == 3 and ds.format == "tsv" and not ds.gzip)
    local rows = all_batches(ds:loader { batch_size = 3, shuffle = false })[1]
    assert(rows[1][1] == 'A "quoted" man walks.' and rows[1][3] == 0 and rows[2][3] == 2 and rows[3][3] == 1)
    local msg = user_error(function()
      data.open(p, { columns = { "premise", "hypothesis", "label" }, label_map = { entailment = 0, contradiction = 2 } })
    end)
    has(msg, p .. ": line 4: label \"neutral\" (field 'label') has no entry in data.label_map")
    msg = user_error(function() data.open(p, { columns = { "premise", "nope" } }) end)
    has(msg, "data.columns names 'nope', which is not a column of this file (its header: premise, hypothesis, label)")
    msg = user_error(function() data.open(p, { columns = { "premise", "hypothesis", "label" } }) end)
    has(msg, "line 2: field 'label' is \"entailment\", expected a number (for label names give data.label_map)")
  end },

  { "csv_quotes", function()
    local ds = data.open(FIX .. "quotes.csv", { columns = { "sentence1", "sentence2", "score" } })
    assert(ds.n == 3 and ds.format == "csv")
    local rows = {}
    for r in ds:iter() do rows[#rows + 1] = r end
    assert(rows[1][1] == "Hello, world" and rows[1][2] == 'She said "hi"' and rows[1][3] == 4.5)
    assert(rows[2][2] == "two\nlines" and rows[3][3] == 0.25)
    -- shuffled reads through the offset index give the same rows
    local got = {}
    for b in ds:loader { batch_size = 2, seed = 5 }:batches() do for _, r in ipairs(b) do got[r[1]] = r[2] end end
    assert(got["Hello, world"] == 'She said "hi"' and got.plain == "two\nlines" and got.x == "y")
  end },

  { "filter_and_max_rows", function()
    local p = FIX .. "pairs.tsv"
    local ds = data.open(p, { columns = { "premise", "hypothesis", "label" }, label_map = { entailment = 1, contradiction = 0 },
                              filter = function(r) return r.label ~= "neutral" end })
    assert(ds.n == 2 and ds.filtered == 1)
    ds = data.open(p, { columns = { "premise", "hypothesis" }, max_rows = 2 })
    assert(ds.n == 2 and not ds.target)
    local msg = user_error(function()
      data.open(p, { columns = { "premise", "hypothesis" }, filter = function(r) return r.nope.x end })
    end)
    has(msg, "line 2: data.filter raised an error")
  end },

  { "nli_triplets_follow_training_nli_v2", function()
    local ds = data.open(FIX .. "nli_small.jsonl", { build = "nli_triplets" }, { seed = 9 })
    local want = { { "P1", "E1", "C1" }, { "E1", "P1", "C1" }, { "P3", "E3", "C3" }, { "E3", "P3", "C3" } }
    assert(ds.n == 4, ds.n)
    for i, t in ipairs(want) do
      for k = 1, 3 do assert(ds.items[i][k] == t[k], ("triplet %d: %s"):format(i, table.concat(ds.items[i], ","))) end
    end
    assert(ds.columns[1] == "anchor" and ds.columns[3] == "negative")
  end },

  { "format_from_name", function()
    assert(data.format_of("x/a.jsonl.gz") == "jsonl" and data.format_of("a.TSV") == "tsv" and data.format_of("a.csv.gz") == "csv")
    assert(data.format_of("a.txt", "tsv") == "tsv")
    has(user_error(function() data.format_of("a.txt") end), "set data.format")
    has(user_error(function() data.open(FIX .. "no_such_file.jsonl", {}) end), "no_such_file.jsonl: cannot open")
  end },

  -- ------------------------------------------------------------ shuffling, resume, batching
  { "lua_shuffle_matches_c", function()
    local t = {}
    for i = 1, 50 do t[i] = i - 1 end
    data.shuffle_list(t, 7, 3, 1)
    local perm = ffi.new("int64_t[50]")
    C.tr_shuffle_perm(perm, 50, 7, 3, 1)
    for i = 1, 50 do assert(t[i] == tonumber(perm[i - 1])) end
  end },

  { "resume_mid_epoch_is_exact", function()
    local p = stsb_train()
    local files = { { FIX .. "dup_anchors.jsonl", { "anchor", "positive" } } }
    if p then files[#files + 1] = { p, { "sentence1", "sentence2", "score" } } end
    for _, f in ipairs(files) do
      for _, o in ipairs({ {}, { bucket = true }, { no_duplicates = true }, { bucket = true, no_duplicates = true } }) do
        local ds = data.open(f[1], { columns = f[2] }, { seed = 11, shuffle_buffer = 1000 })
        local function loader()
          return ds:loader { batch_size = 8, seed = 11, bucket = o.bucket, no_duplicates = o.no_duplicates, window = 4 }
        end
        local full = loader()
        local seq = {}
        for e = 1, 2 do for b in full:batches() do seq[#seq + 1] = { e, b } end end
        local cut = math.floor(#seq / 2) + 3      -- in the second epoch for the small file
        local a = loader()
        for _ = 1, cut do a:next() if a.position == 0 then a:next() end end
        local st = a:state()
        local r = loader()
        r:restore(st)
        local k = 0
        for i = 1, #seq do
          local b1, b2 = a:next(), r:next()
          if b1 == nil then assert(b2 == nil) b1, b2 = a:next(), r:next() end
          if b1 == nil then break end
          for j = 1, #b1 do assert(key(b1[j]) == key(b2[j]), "resumed batch differs") end
          k = k + 1
          if k > 40 then break end
        end
        assert(k > 0)
      end
    end
  end },

  { "no_duplicate_batches", function()
    local ds = data.open(FIX .. "dup_anchors.jsonl", { columns = { "anchor", "positive" } }, { seed = 2 })
    local ld = ds:loader { batch_size = 4, seed = 2, no_duplicates = true, window = 2 }
    local count, rows = 0, {}
    for b in ld:batches() do
      local seen = {}
      for _, r in ipairs(b) do
        for t = 1, 2 do assert(not seen[r[t]], "duplicate text in a batch: " .. r[t]) seen[r[t]] = true end
        rows[r[2]] = (rows[r[2]] or 0) + 1
        count = count + 1
      end
    end
    assert(count == 60)
    for _, c in pairs(rows) do assert(c == 1) end
    -- without the option, the same data does repeat anchors within a batch
    local dup = false
    for b in ds:loader { batch_size = 4, seed = 2 }:batches() do
      local seen = {}
      for _, r in ipairs(b) do if seen[r[1]] then dup = true end seen[r[1]] = true end
    end
    assert(dup, "the fixture should produce duplicates without no_duplicates")
  end },

  { "bucketing_cuts_padding", function()
    local p = stsb_train()
    if not p then return end
    local ds = data.open(p, { columns = { "sentence1", "sentence2", "score" } }, { seed = 4 })
    local function padded(ld)
      local cost, n = 0, 0
      for b in ld:batches() do
        local m = 0
        for _, r in ipairs(b) do m = math.max(m, #r[1], #r[2]) n = n + 1 end
        cost = cost + m * #b
      end
      assert(n == 5749)
      return cost
    end
    local plain = padded(ds:loader { batch_size = 16, seed = 4 })
    local bucketed = padded(ds:loader { batch_size = 16, seed = 4, bucket = true, length = function(r) return math.max(#r[1], #r[2]) end })
    assert(bucketed < 0.8 * plain, ("bucketed %d vs %d"):format(bucketed, plain))
  end },

  { "from_recipe", function()
    local p = stsb_train()
    if not p then return end
    local ds, ld = data.train({ seed = 3, data = { train = p, columns = { "sentence1", "sentence2" }, max_rows = 64 },
                                batch = { size = 8 }, loss = { name = "mnrl" } })
    assert(ds.n == 64 and ld.no_duplicates and ld.batch_size == 8 and ld.shuffle)
    local _, ld2 = data.train({ seed = 3, data = { train = p, columns = { "sentence1", "sentence2", "score" }, max_rows = 8 },
                                batch = { size = 8 }, loss = { name = "cosent" } })
    assert(not ld2.no_duplicates)
    assert(data.eval({ data = {} }) == nil)
    -- a classifier's label2id stands in for data.label_map
    local ds3 = data.train({ data = { train = FIX .. "pairs.tsv", columns = { "premise", "hypothesis", "label" } },
                             batch = { size = 2 }, loss = { name = "cross_entropy" } },
                           { label_map = { entailment = 0, neutral = 1, contradiction = 2 } })
    assert(ds3.n == 3 and ds3.target)
  end },

  -- ------------------------------------------------------------ bounded memory
  { "memory_bounded_over_200k_gzip_lines", function()
    local gzpath, plainpath = tmpname(".jsonl.gz"), tmpname(".jsonl")
    local lines = {}
    for i = 1, 200000 do
      lines[#lines + 1] = ('{"sentence1": "row %d says something about item %d", "sentence2": "a paraphrase of row %d", "score": %d.5}')
        :format(i, i * 7 % 1000, i, i % 5)
      if #lines == 5000 then
        lines[#lines + 1] = ""
        local f = io.open(plainpath, "ab") f:write(table.concat(lines, "\n")) f:close()
        lines = {}
      end
    end
    local ok = os.execute(("gzip -c %q > %q"):format(plainpath, gzpath))
    if ok ~= 0 and ok ~= true then print("SKIP memory test: gzip not available") os.remove(plainpath) return end
    lines = nil   -- luacheck: ignore 311 (releases the generated text before measuring memory)
    local cols = { columns = { "sentence1", "sentence2", "score" } }
    for _, p in ipairs({ gzpath, plainpath }) do
      collectgarbage() collectgarbage()
      local base = collectgarbage("count")
      local ds = data.open(p, cols, { seed = 1, shuffle_buffer = 4096 })
      assert(ds.n == 200000 and ds.gzip == (p == gzpath))
      collectgarbage() collectgarbage()
      local after_open = collectgarbage("count")
      local ld = ds:loader { batch_size = 32, seed = 1 }
      local peak, samples, n = 0, {}, 0
      for b in ld:batches() do
        n = n + #b
        if n % 40000 < 32 then
          collectgarbage() collectgarbage()
          local kb = collectgarbage("count")
          samples[#samples + 1] = kb
          peak = math.max(peak, kb)
        end
      end
      assert(n == 200000, n)
      -- the file is ~20 MB of text; the Lua heap grows by the shuffle buffer at most
      assert(after_open - base < 2048, ("open grew the heap by %.0f KiB"):format(after_open - base))
      assert(peak - base < 6 * 1024, ("iterating grew the heap by %.0f KiB"):format(peak - base))
      assert(samples[#samples] - samples[2] < 1024, ("heap kept growing: %.0f -> %.0f KiB"):format(samples[2], samples[#samples]))
      ds:close()
    end
    os.remove(gzpath)
    os.remove(plainpath)
  end },
}
