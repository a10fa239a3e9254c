-- tests/gpu/test_device_lua.lua — the Lua side of device memory on a real GPU, run by
-- tests/gpu/run.sh as `./trainer run tests/gpu/test_device_lua.lua`: t:to("cuda"),
-- t:to("cuda:0"), t:to("cpu"), t:to{ device =, dtype =, tag = } for every dtype against the
-- CPU's conversion; tolist, item and printing of device tensors; trainer.memory.stats,
-- report and snapshot for "cuda:0" (tags, device figures); a device out of memory as a Lua
-- "oom" error that leaves the device usable, and exit status 2 from `trainer run`; a
-- safetensors file read to the device equal to the host read; the batch feed
-- (trainer.train.batch_feed: pinned slots, a copy stream, the compute stream waiting on its
-- event) giving tok:batch's tensors on the device, batch after batch, with the kernels that
-- read each batch queued before the next is prepared. One PASS/FAIL line per case
-- (SKIP for all without a GPU), then "N passed, N failed"; exits non-zero on a failure.
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local native = require("trainer.native")
-- the tests' helpers (tests/lua/testlib.lua, which the GPU bundle carries too)
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/gpu"
local lib = dofile(here .. "/../lua/testlib.lua")

local function same(a, b, what)
  assert(#a == #b, what .. ": lengths " .. #a .. " vs " .. #b)
  for i = 1, #a do
    assert(a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i]),
      ("%s: element %d is %s, expected %s"):format(what, i, tostring(a[i]), tostring(b[i])))
  end
end

local bytes_of = lib.bytes

local function same_bytes(a, b, what)
  assert(a:dtype() == b:dtype() and a:numel() == b:numel(), what .. ": dtype or size differ")
  assert(bytes_of(a) == bytes_of(b), what .. ": bytes differ")
end

local values = { 1, -2.5, 3.140625, 0.1, 65504, -0.0078125, 7, 1e-3 }
local ints = { 1, -2, 3, 40000, -70000, 0, 7, 123456 }

local cases = {
  { "to_cuda_and_back_every_dtype", function()
    for _, dt in ipairs({ "f32", "bf16", "f16", "i32", "i64" }) do
      local src = (dt == "i32" or dt == "i64") and ints or values
      local h = T.from_table(src, { dtype = dt })
      for _, dev in ipairs({ "cuda", "cuda:0" }) do
        local d = h:to(dev)
        assert(d:device() == "cuda:0" and d:dtype() == dt and d:tag() == h:tag(), dev .. " " .. dt)
        local back = d:to("cpu")
        assert(back:device() == "cpu")
        same(back:values(), h:values(), dt .. " via " .. dev)
        same(d:tolist(), h:tolist(), dt .. " tolist of the device tensor")
        d:free(); back:free()
      end
      h:free()
    end
  end },
  { "dtype_change_on_the_way", function()
    local h = T.from_table(values)
    local d = h:to({ device = "cuda", dtype = "bf16", tag = "weights" })
    assert(d:dtype() == "bf16" and d:tag() == "weights" and d:device() == "cuda:0")
    local ref = h:to("bf16")
    same(d:values(), ref:values(), "f32 cpu -> bf16 cuda")
    local up = d:to({ dtype = "f32" })   -- device -> device with a dtype change
    assert(up:device() == "cuda:0")
    same(up:values(), ref:values(), "bf16 cuda -> f32 cuda")
    local down = d:to({ device = "cpu", dtype = "f16" })
    local ref16 = ref:to("f16")
    same(down:values(), ref16:values(), "bf16 cuda -> f16 cpu")
    for _, t in ipairs({ h, d, ref, up, down, ref16 }) do t:free() end
  end },
  { "item_and_printing_synchronise", function()
    local d = T.full({ 1 }, 2.5, { device = "cuda" })
    assert(d:item() == 2.5, "item " .. tostring(d:item()))
    d:fill(-4)
    assert(d:item() == -4, "item after fill " .. tostring(d:item()))
    local m = T.from_table({ { 1, 2 }, { 3, 4 } }, { device = "cuda:0" })
    local s = tostring(m)
    assert(s:find("device=cuda:0", 1, true) and s:find("[[1., 2.],", 1, true), s)
    d:free(); m:free()
  end },
  { "memory_stats_for_cuda", function()
    memory.reset_peak("cuda:0")
    local before = memory.stats("cuda:0")
    local w = T.zeros({ 1024, 1024 }, { device = "cuda", tag = "weights" })
    local s = memory.stats("cuda:0")
    assert(s.by_tag.weights - before.by_tag.weights == 4 * 2 ^ 20, "weights grew by " ..
      (s.by_tag.weights - before.by_tag.weights))
    local dm = s.device_memory
    assert(dm and dm.total > 0 and dm.free <= dm.total and dm.outside_allocator >= 0, "device_memory")
    assert(dm.total - dm.free >= s.reserved, "the card's used bytes cover the reserved ones")
    print(("  info: cuda:0 total %s, free %s, outside the allocator %s, reserved %s"):format(
      memory.format_size(dm.total), memory.format_size(dm.free), memory.format_size(dm.outside_allocator),
      memory.format_size(s.reserved)))
    local r = memory.report("cuda:0")
    assert(r:find("memory on cuda:0", 1, true) and r:find("device total", 1, true), r)
    -- the ledger names the card (trainer.core.card): "memory on cuda:0 (NAME, compute capability M.m)"
    local card = require("trainer.core.card").of("cuda:0")
    assert(card and r:find(("memory on cuda:0 (%s, compute capability %s)"):format(card.name, card.cc), 1, true), r)
    local path = os.tmpname()
    memory.snapshot(path, "cuda:0")
    local f = assert(io.open(path)); local text = f:read("*a"); f:close(); os.remove(path)
    assert(text:find('"device_memory"', 1, true) and text:find('"cuda:0"', 1, true), "snapshot")
    w:free()
    assert(memory.stats("cuda:0").by_tag.weights == before.by_tag.weights, "weights fell back")
    assert(memory.stats().device_memory == nil, "the CPU has no device figures")
  end },
  { "out_of_memory_then_recovery", function()
    local total = memory.stats("cuda:0").device_memory.total
    local ok, e = pcall(T.empty, { math.floor(total / 4) + 2 ^ 28 }, { device = "cuda" })
    assert(not ok and errors.is_user_error(e) and e.kind == "oom", "expected an oom error: " .. tostring(e))
    assert(e.msg:find("out of memory on cuda:0", 1, true) and e.msg:find("Ledger:", 1, true) and
      e.msg:find("The device has", 1, true), e.msg)
    local x = T.ones({ 1024 }, { device = "cuda" })
    assert(x:values()[1024] == 1, "the device works after the OOM")
    x:free()
    -- and a script that runs out of device memory exits 2 with the ledger on stderr
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(('local T = require("trainer.core.tensor")\nT.empty({ %d }, { device = "cuda" })\n'):format(
      math.floor(total / 4) + 2 ^ 28))
    f:close()
    local out = os.tmpname()
    local rc = os.execute(("%q run %q >%q 2>&1"):format(native.root() .. "/trainer", script, out))
    local g = assert(io.open(out)); local text = g:read("*a"); g:close()
    os.remove(script); os.remove(out)
    assert(rc == 2 or rc == 512, "exit status " .. tostring(rc) .. ": " .. text)
    assert(text:find("out of memory on cuda:0", 1, true), text)
  end },
  { "safetensors_to_the_device", function()
    local path = os.tmpname()
    local big = T.randn({ 1100, 2049 }, { seed = 3 })   -- 9 MiB of f32: two staging chunks
    local half = T.randn({ 77 }, { seed = 4, dtype = "bf16" })
    st.save(path, { big = big, half = half })
    local r = st.load(path)
    for _, spec in ipairs({ { "big", "f32" }, { "big", "bf16" }, { "half", "f32" }, { "half", "bf16" } }) do
      local host = r:tensor(spec[1], { dtype = spec[2] })
      local dev = r:tensor(spec[1], { dtype = spec[2], device = "cuda", tag = "weights" })
      assert(dev:device() == "cuda:0" and dev:tag() == "weights")
      local back = dev:to("cpu")
      same_bytes(back, host, spec[1] .. " as " .. spec[2])
      same_bytes(dev, host, spec[1] .. " as " .. spec[2] .. ", read on the device")
      -- read_into an existing device tensor too
      dev:fill(0)
      r:read_into(spec[1], dev)
      local again = dev:to("cpu")
      same_bytes(again, host, spec[1] .. " read_into")
      for _, t in ipairs({ host, dev, back, again }) do t:free() end
    end
    r:close()
    -- a device tensor saved comes back equal
    local d = big:to("cuda")
    local path2 = os.tmpname()
    st.save(path2, { big = d })
    local r2 = st.load(path2)
    local loaded = r2:tensor("big")
    same_bytes(loaded, big, "saved from the device")
    r2:close()
    for _, t in ipairs({ big, half, d, loaded }) do t:free() end
    os.remove(path); os.remove(path2)
  end },
  { "batch_feed_uploads_on_its_copy_stream", function()
    -- five batches of growing length through the two slots; each batch's ids are read by a
    -- kernel on the compute stream (a copy of the view) before the next batch is encoded,
    -- and all are compared only at the end: a missing wait or a slot refilled too early
    -- shows as another batch's tokens
    local tokenizer = require("trainer.core.tokenizer")
    local dir = os.tmpname()
    os.remove(dir)
    require("trainer.models").tiny_folder(dir, { seed = 1 })
    local tok = tokenizer.load(dir)
    local feed = require("trainer.train.batch_feed").new("cuda:0")
    local opts = { max_length = 64, truncation = true, padding = "longest" }
    local kept, want = {}, {}
    for k = 1, 5 do
      local texts = {}
      for i = 1, 4 + k do texts[i] = ("the cat %d sat on mat %d"):format(k, i) .. (" dog"):rep(k * 3) end
      local enc, n_tokens = feed:encode(tok, texts, opts, { k, k + 1 })
      assert(enc.input_ids:device() == "cuda:0" and feed:pinned(), "on the device, from a pinned slot")
      kept[k] = { enc.input_ids:to({ device = "cuda:0" }), enc.attention_mask:to({ device = "cuda:0" }),
        enc.targets:to({ device = "cuda:0" }) }
      tokenizer.free_batch(enc)
      feed:release()
      local ref = tok:batch(texts, opts)
      local n = 0
      for _, v in ipairs(ref.attention_mask:values()) do n = n + v end
      assert(n_tokens == n, ("batch %d: n_tokens %d, the mask says %d"):format(k, n_tokens, n))
      want[k] = { ref.input_ids:values(), ref.attention_mask:values(), { k, k + 1 } }
      tokenizer.free_batch(ref)
    end
    for k = 1, 5 do
      for j = 1, 3 do
        same(kept[k][j]:values(), want[k][j], ("batch %d part %d"):format(k, j))
        kept[k][j]:free()
      end
    end
    feed:free(); tok:free()
    os.execute("rm -rf '" .. dir .. "'")
  end },
}

if C.tr_cuda_device_count() < 1 then
  print("SKIP test_device_lua: no CUDA device is visible")
  print("0 passed, 0 failed, 1 skipped")
  return 0
end
return lib.run_cases("test_device_lua", cases)
