-- tests/cudacpu/host_syncs.lua — a training step on device = "cuda" makes no host round trip
-- between two logged steps, run on the emulator by tests/cudacpu/suites.sh
-- as `build/cudacpu/trainer run tests/cudacpu/host_syncs.lua`.
--
-- Each case trains a tiny BERT for 7 steps with log.every = 3 (logged: 1, 3, 6, 7) and counts,
-- around every step that is not logged (2, 4, 5), the project's own host-sync counts
-- (trainer.core.runtime.host_syncs: every device-to-host copy and every stream, event and
-- device synchronisation core/ makes): their round trips must be 0. Where the emulator's
-- counters can be read (cudacpu_counts, exported by the binary) they must agree: no
-- device-to-host copy, no stream or device synchronisation, and no event synchronisation but
-- the batch feed's slot waits, which the project counts apart (feed_waits). The cases:
-- fp32 MNRL, fp32 cross-entropy (a classifier), CoSENT and cosine losses, bf16 + LoRA, fp16
-- with its loss scale (AdamW; and SGD with momentum and Adafactor from an overflowing initial
-- scale, so that steps are skipped on the device and at least one is), Adafactor and SGD with
-- momentum, gradient clipping. Also: an
-- evaluation's round trips do not grow with its number of batches, and a token id outside
-- the embedding's vocabulary, checked on the device, still stops the run (exit 1's user
-- error) naming the id, its position and the fix, at the next logged step. The metrics rows
-- of every run have a finite loss at every step. One PASS/FAIL line per case, then
-- "N passed, N failed"; exits non-zero on a failure.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local outputs = require("trainer.train.outputs")
local recipe_mod = require("trainer.recipe")
local run = require("trainer.train.run")
-- the tests' helpers, beside this file's folder (native.root() is the emulated tree's)
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/cudacpu"
local lib = dofile(here .. "/../lua/testlib.lua")

local STEPS, EVERY = 7, 3

-- The emulator's counters, when this binary has them (the emulated build exports them).
local emu = pcall(ffi.cdef, [[
struct cudacpu_counters {
  unsigned long long kernels, kernels_run, kernels_failed, blocks, threads, barriers, warp_collectives;
  unsigned long long copies_h2d, copies_d2h, copies_d2d, copies_h2h, bytes_h2d, bytes_d2h, bytes_d2d;
  unsigned long long memsets, stream_syncs, stream_queries, event_records, event_syncs, event_queries;
  unsigned long long stream_waits, device_syncs, mallocs, frees, host_allocs, host_frees;
};
void cudacpu_counts(struct cudacpu_counters *out);
]]) and pcall(function() return ffi.C.cudacpu_counts end)
local emu_c = emu and ffi.new("struct cudacpu_counters") or nil
local function emu_counts()
  if not emu then return nil end
  ffi.C.cudacpu_counts(emu_c)
  return { d2h = tonumber(emu_c.copies_d2h), stream = tonumber(emu_c.stream_syncs),
           event = tonumber(emu_c.event_syncs), device = tonumber(emu_c.device_syncs) }
end

-- ---------------------------------------------------------------- fixture
local dir = lib.tmpdir()
local models = require("trainer.models")
models.tiny_folder(dir .. "/tiny", { seed = 3 })
models.tiny_folder(dir .. "/tiny_cls", { seed = 4, task = "classification" })
local rnd, sent = lib.sentences(17, lib.words, 2, 5)
local lines = {}
for i = 1, 64 do
  lines[i] = ('{"sentence1": "%s", "sentence2": "%s", "score": %.1f, "label": %d}\n'):format(sent(), sent(),
    rnd(50) / 10, rnd(3) - 1)
end
lib.write(dir .. "/train.jsonl", table.concat(lines))
lib.write(dir .. "/eval.jsonl", table.concat(lines, "", 1, 24))

local runs = 0
-- Loads a recipe for the tiny models: the defaults below, then `body` (recipe fields, which
-- override them; MODEL, CLS, TRAIN and EVAL stand for the fixture's paths). Returns the
-- resolved recipe and its out folder.
local function resolved(body)
  runs = runs + 1
  local out = ("%s/run%d"):format(dir, runs)
  local path = out .. ".lua"
  local paths = { MODEL = dir .. "/tiny", CLS = dir .. "/tiny_cls", TRAIN = dir .. "/train.jsonl",
                  EVAL = dir .. "/eval.jsonl" }
  body = body:gsub("%u%u%u+", function(w) return paths[w] and ("%q"):format(paths[w]) or w end)
  lib.write(path, ([[
return {
  model = { from = %q },
  data = { train = %q, columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { lr = 1e-3 }, batch = { size = 4 }, steps = %d,
  log = { every = %d, quiet = true }, device = "cuda", out = %q, seed = 7,
  %s
}
]]):format(paths.MODEL, paths.TRAIN, STEPS, EVERY, out, body))
  return recipe_mod.load(path), out
end

local function logged(step) return step == 1 or step % EVERY == 0 or step >= STEPS end

-- Trains `body`'s recipe (opts: run.build's, e.g. the fp16 scaler's test options); returns,
-- per unlogged step, the project's counts during it (and the emulator's), and the metrics rows.
local function train(body, opts)
  local res, out = resolved(body)
  outputs.mkdir(out)
  local t = run.build(res, opts)
  local per_step = {}
  local ok, err = pcall(function()
    t.metrics = outputs.open_metrics(out)
    while not t:done() do
      local before, ebefore = runtime.host_syncs(), emu_counts()
      assert(t:train_step(), "the data ran out")
      local d = runtime.host_syncs_since(before)
      local e = emu_counts()
      if e then for k, v in pairs(ebefore) do e[k] = e[k] - v end end
      if not logged(t.step) then per_step[#per_step + 1] = { step = t.step, ours = d, emu = e } end
    end
    t:finish()
  end)
  t:free()
  if not ok then error(err, 0) end
  return per_step, outputs.read_metrics(out)
end

local function show(d)
  return ("%d round trips (%d copies to the host, %d stream, %d event, %d device synchronisations; %d feed waits)")
    :format(d.round_trips, d.copies_d2h, d.stream_syncs, d.event_syncs, d.device_syncs, d.feed_waits)
end

local function assert_no_round_trips(body, opts)
  local per_step, rows = train(body, opts)
  assert(#per_step == 3, ("%d unlogged steps measured, expected 3"):format(#per_step))
  for _, s in ipairs(per_step) do
    assert(s.ours.round_trips == 0, ("step %d (not logged) made %s"):format(s.step, show(s.ours)))
    if s.emu then
      assert(s.emu.d2h == 0 and s.emu.stream == 0 and s.emu.device == 0 and s.emu.event == s.ours.feed_waits,
        ("step %d: the emulator counted %d copies to the host, %d stream, %d event, %d device synchronisations; "
         .. "the project %s"):format(s.step, s.emu.d2h, s.emu.stream, s.emu.event, s.emu.device, show(s.ours)))
    end
  end
  assert(#rows == STEPS, ("%d metrics rows, expected %d"):format(#rows, STEPS))
  for i, r in ipairs(rows) do
    assert(r.step == i and type(r.loss) == "number" and r.loss == r.loss, ("row %d: step %s, loss %s"):format(i,
      tostring(r.step), tostring(r.loss)))
  end
  return rows
end

-- fp16 with `optim` (recipe fields) on the classifier, with the scaler's test options that
-- force skipped steps (2^20 overflows its fp16 gradients, growth_interval 2 grows the scale
-- back): no round trip between logged steps, a loss scale on every row, and at least one
-- skipped step that is not logged, so that the device skip is what the count measured.
local function assert_fp16_skips(optim)
  local rows = assert_no_round_trips([[precision = "fp16",
      model = { from = CLS, task = "classification", num_labels = 3 },
      data = { train = TRAIN, columns = { "sentence1", "sentence2", "label" } }, loss = { name = "cross_entropy" },]]
    .. optim, { scaler = { init_scale = 2 ^ 20, growth_interval = 2 } })
  local skipped, unlogged = {}, 0
  for i, r in ipairs(rows) do
    assert(type(r.loss_scale) == "number", ("row %d has no loss_scale"):format(i))
    if r.skipped then
      skipped[#skipped + 1] = r.step
      if not logged(r.step) then unlogged = unlogged + 1 end
    end
  end
  assert(unlogged > 0, ("no unlogged step was skipped (skipped: %s): the initial loss scale no longer overflows "
    .. "long enough, the check is dead"):format(#skipped > 0 and table.concat(skipped, ", ") or "none"))
end

local cases = {
  { "fp32_mnrl", function() assert_no_round_trips("") end },
  { "fp32_cross_entropy", function()
    assert_no_round_trips([[model = { from = CLS, task = "classification", num_labels = 3 },
      data = { train = TRAIN, columns = { "sentence1", "sentence2", "label" } }, loss = { name = "cross_entropy" },]])
  end },
  { "fp32_cosent", function()
    assert_no_round_trips([[loss = { name = "cosent" }, data = { train = TRAIN, columns = { "sentence1", "sentence2", "score" } },]])
  end },
  { "fp32_cosine", function()
    assert_no_round_trips([[loss = { name = "cosine", score_scale = 5 },
      data = { train = TRAIN, columns = { "sentence1", "sentence2", "score" } },]])
  end },
  { "bf16_lora", function()
    assert_no_round_trips([[precision = "bf16",
      lora = { r = 4, alpha = 8, targets = { "query", "value" } },]])
  end },
  { "fp16_loss_scale_adamw", function()
    local rows = assert_no_round_trips([[precision = "fp16",]])
    for i, r in ipairs(rows) do assert(type(r.loss_scale) == "number", ("row %d has no loss_scale"):format(i)) end
  end },
  -- fp16 with SGD and Adafactor from an overflowing initial loss scale: steps are skipped on
  -- the device (between logged steps too) and the step number is corrected there from the
  -- skip count
  { "fp16_loss_scale_sgd_momentum", function()
    assert_fp16_skips([[optim = { name = "sgd", lr = 1e-2, momentum = 0.9 },]])
  end },
  { "fp16_loss_scale_adafactor", function() assert_fp16_skips([[optim = { name = "adafactor" },]]) end },
  { "fp32_adafactor", function() assert_no_round_trips([[optim = { name = "adafactor" },]]) end },
  { "fp32_sgd_momentum", function() assert_no_round_trips([[optim = { name = "sgd", lr = 1e-2, momentum = 0.9 },]]) end },
  { "bad_id_reported_at_the_logged_step", function()
    local bad = dofile(here .. "/../lua/bad_ids_case.lua")
    local msg = bad.check(bad.run("cuda", lib))
    assert(msg:find("Found on cuda:0", 1, true), msg)
  end },
  { "grad_clip", function()
    local rows = assert_no_round_trips([[grad_clip = 0.5,]])
    for i, r in ipairs(rows) do assert(type(r.grad_norm) == "number", ("row %d has no grad_norm"):format(i)) end
  end },
}

if C.tr_cuda_device_count() < 1 then
  print("SKIP host_syncs: no CUDA device is visible (build/cudacpu/trainer runs it on the emulator)")
  print("0 passed, 0 failed, 1 skipped")
  os.execute("rm -rf '" .. dir .. "'")
  return 0
end
return lib.run_cases("host_syncs", cases, arg and arg[1], {
  before = function() require("trainer.core.memory").empty_cache() end,
  after = function() os.execute("rm -rf '" .. dir .. "'") end,
})
