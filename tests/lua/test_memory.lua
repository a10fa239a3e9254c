-- The memory ledger seen from Lua: tags, peaks, limits and out-of-memory errors.
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local errors = require("trainer.core.errors")

local MiB = 2 ^ 20

return {
  { "tag_accounting_and_peaks", function()
    collectgarbage()
    memory.reset_peak()
    local before = memory.stats()
    local x = T.zeros({ 1024, 1024 }, { tag = "activations" })
    local during = memory.stats()
    assert(during.by_tag.activations - before.by_tag.activations == 4 * MiB,
      "activations grew by " .. (during.by_tag.activations - before.by_tag.activations))
    assert(during.allocated - before.allocated == 4 * MiB)
    assert(during.reserved >= during.allocated)
    x:free()
    local after = memory.stats()
    assert(after.allocated == before.allocated, "allocated did not fall back")
    assert(after.peak_allocated >= before.allocated + 4 * MiB, "peak lost the high mark")
    assert(after.peak_by_tag.activations >= 4 * MiB)
    assert(after.reserved >= after.allocated)
  end },
  { "every_tag_counts_separately", function()
    local ts = {}
    for i, tag in ipairs(memory.tags) do ts[i] = T.empty({ i * 1024 }, { tag = tag }) end
    local s = memory.stats()
    for i, tag in ipairs(memory.tags) do
      assert(s.by_tag[tag] >= i * 4096, tag .. " " .. s.by_tag[tag])
    end
    for _, t in ipairs(ts) do t:free() end
  end },
  { "limit_gives_oom_with_ledger_and_recovers", function()
    memory.empty_cache()
    memory.set_limit(64 * MiB)
    local ok, e = pcall(T.empty, { 32 * MiB }, { tag = "activations" })   -- 128 MiB of f32
    memory.set_limit(nil)
    assert(not ok, "a 128 MiB tensor fitted under a 64 MiB limit")
    assert(errors.is_user_error(e) and e.kind == "oom", "not an oom error: " .. tostring(e))
    local msg = e.msg
    assert(msg:find("out of memory", 1, true), msg)
    for _, tag in ipairs(memory.tags) do assert(msg:find(tag, 1, true), "ledger lacks " .. tag .. ": " .. msg) end
    memory.set_limit(64 * MiB)
    local y = T.zeros({ 1024 }, { tag = "activations" })   -- still works
    assert(y:numel() == 1024)
    y:free()
    memory.set_limit(nil)
  end },
  { "set_limit_accepts_sizes", function()
    memory.set_limit("1GiB")
    assert(memory.stats().limit == 2 ^ 30)
    memory.set_limit(nil)
    assert(memory.stats().limit == 0)
  end },
  { "report_and_snapshot", function()
    local x = T.zeros({ 1000 }, { tag = "weights" })
    local r = memory.report()
    for _, tag in ipairs(memory.tags) do assert(r:find(tag, 1, true), "report lacks " .. tag) end
    local path = os.tmpname()
    memory.snapshot(path)
    local f = assert(io.open(path))
    local text = f:read("*a")
    f:close()
    os.remove(path)
    assert(text:find('"segments"', 1, true) and text:find('"weights"', 1, true), text:sub(1, 200))
    x:free()
    local ok, e = pcall(memory.snapshot, "/nonexistent-dir/snap.json")
    assert(not ok and errors.is_user_error(e), "unwritable snapshot path did not fail cleanly")
  end },
  { "empty_cache_releases", function()
    local x = T.empty({ 8 * MiB })   -- 32 MiB
    x:free()
    assert(memory.stats().reserved > 0)
    memory.empty_cache()
    assert(memory.stats().reserved == memory.stats().allocated or memory.stats().reserved < 32 * MiB)
  end },
}
