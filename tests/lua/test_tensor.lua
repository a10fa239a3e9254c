-- Tensors in Lua: constructors, properties, conversions, views, lifetime, printing.
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local errors = require("trainer.core.errors")

local function close(a, b, tol) return math.abs(a - b) <= tol end

return {
  { "constructors_and_properties", function()
    local x = T.zeros({ 2, 3 }, { dtype = "bf16", tag = "weights" })
    assert(x:dtype() == "bf16" and x:device() == "cpu" and x:tag() == "weights")
    assert(x:numel() == 6 and x:nbytes() == 12 and #x:shape() == 2 and x:shape()[2] == 3)
    local l = x:tolist()
    assert(#l == 2 and #l[1] == 3 and l[2][3] == 0)
    x:free()
    local o = T.ones({ 4 })
    assert(o:tolist()[4] == 1)
    o:free()
    local f = T.full({ 2 }, 2.5, { dtype = "f16" })
    assert(f:tolist()[1] == 2.5)
    f:free()
  end },
  { "from_table_and_arange", function()
    local x = T.from_table({ { 1, 2 }, { 3, 4.5 } })
    assert(x:shape()[1] == 2 and x:tolist()[2][2] == 4.5)
    x:free()
    local a = T.arange(5, { dtype = "i64" })
    local v = a:tolist()
    assert(#v == 5 and v[1] == 0 and v[5] == 4 and a:dtype() == "i64")
    a:free()
    local b = T.arange(1, 2, 0.25)
    assert(#b:tolist() == 4)
    b:free()
    local ok, e = pcall(T.from_table, { { 1, 2 }, { 3 } })
    assert(not ok and errors.is_user_error(e) and e.msg:find("ragged", 1, true))
  end },
  { "bf16_rounds_to_nearest_even", function()
    local f = T.from_table({ 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, 1 / 3 })
    local x = f:to("bf16")
    f:free()
    local v = x:tolist()
    assert(v[1] == 1, v[1])                 -- tie rounds to even (1.0)
    assert(v[2] == 1 + 2 ^ -6, v[2])        -- tie rounds to even (up)
    assert(close(v[3], 1 / 3, 2 ^ -9))
    x:free()
  end },
  { "randn_statistics_and_determinism", function()
    local a = T.randn({ 10000 }, { seed = 7, stream = 1 })
    local b = T.randn({ 10000 }, { seed = 7, stream = 1 })
    local va, vb = a:tolist(), b:tolist()
    local sum, sq = 0, 0
    for i = 1, #va do
      assert(va[i] == vb[i])
      sum = sum + va[i]; sq = sq + va[i] ^ 2
    end
    local mean, var = sum / #va, sq / #va - (sum / #va) ^ 2
    assert(math.abs(mean) < 0.05 and math.abs(var - 1) < 0.05, mean .. " " .. var)
    a:free(); b:free()
  end },
  { "views_keep_storage_alive", function()
    collectgarbage()   -- earlier tests' forgotten temporaries must not be freed mid-test
    local before = memory.stats().allocated
    local x = T.arange(12)
    local r = x:reshape({ 3, 4 })
    local n = x:narrow(4, 4)
    x:free()
    assert(r:tolist()[3][4] == 11)
    assert(n:tolist()[1] == 4 and n:numel() == 4)
    r:free()
    assert(memory.stats().allocated > before)   -- n still holds the storage
    n:free()
    assert(memory.stats().allocated == before)
  end },
  { "use_after_free_is_an_error", function()
    local x = T.zeros({ 2 })
    x:free()
    x:free()   -- twice is harmless
    local ok, e = pcall(x.numel, x)
    assert(not ok and errors.is_user_error(e) and e.msg:find("freed", 1, true))
    assert(tostring(x) == "tensor(<freed>)")
  end },
  { "bad_arguments", function()
    local ok, e = pcall(T.zeros, { 2 }, { dtype = "f8" })
    assert(not ok and e.msg:find("unknown dtype", 1, true))
    ok, e = pcall(T.zeros, { 2 }, { tag = "grad" })
    assert(not ok and e.msg:find("unknown tag", 1, true))
    ok, e = pcall(T.zeros, { -1 })
    assert(not ok and e.msg:find("non-negative", 1, true))
    local x = T.arange(6)
    ok, e = pcall(x.reshape, x, { 4 })
    assert(not ok and errors.is_user_error(e), tostring(e))
    x:free()
  end },
  { "tostring_abbreviates", function()
    local x = T.zeros({ 100, 100 })
    local s = tostring(x)
    assert(s:find("...", 1, true) and s:find("dtype=f32", 1, true), s:sub(1, 100))
    x:free()
    local y = T.from_table({ 1.5, -2 })
    assert(tostring(y):find("[1.5, -2.]", 1, true), tostring(y))
    y:free()
  end },
  { "clone_is_independent", function()
    local x = T.from_table({ 1, 2, 3 })
    local c = x:clone()
    x:fill(9)
    assert(c:tolist()[1] == 1 and x:tolist()[1] == 9)
    x:free(); c:free()
  end },
}
