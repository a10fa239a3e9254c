-- Tensors and memory on a GPU device as seen from Lua, on whatever machine runs the suite:
-- without a GPU (or in a build without CUDA) every device call fails with a user error that
-- names the device and the fix, and the CPU paths of :to are unchanged; with a GPU the same
-- cases check the round trips instead (tests/gpu/test_device_lua.lua checks more there).
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local runtime = require("trainer.core.runtime")
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")

local has_gpu = C.tr_cuda_device_count() > 0

-- Runs fn, which must raise a user error whose message contains every string in `needles`.
local function user_error(fn, needles)
  local ok, e = pcall(fn)
  assert(not ok, "expected an error")
  assert(errors.is_user_error(e), "not a user error: " .. tostring(e))
  for _, s in ipairs(needles) do
    assert(e.msg:find(s, 1, true), ("message lacks %q: %s"):format(s, e.msg))
  end
  assert(not e.msg:find("internal error", 1, true) and not e.msg:find("traceback", 1, true), e.msg)
  return e.msg
end

local no_gpu_words = { "cuda:0", "cpu" }

local function same(a, b)
  assert(#a == #b, "lengths differ")
  for i = 1, #a do assert(a[i] == b[i], ("element %d: %s vs %s"):format(i, tostring(a[i]), tostring(b[i]))) end
end

return {
  { "to_cuda_without_gpu_is_a_user_error", function()
    local x = T.from_table({ 1, 2, 3 })
    if has_gpu then
      local d = x:to("cuda")
      assert(d:device() == "cuda:0")
      same(d:tolist(), { 1, 2, 3 })
      d:free()
    else
      user_error(function() return x:to("cuda") end, no_gpu_words)
      user_error(function() return x:to("cuda:0") end, no_gpu_words)
      user_error(function() return x:to({ device = "cuda", dtype = "bf16" }) end, no_gpu_words)
      user_error(function() return T.zeros({ 2 }, { device = "cuda" }) end, no_gpu_words)
    end
    x:free()
  end },
  { "memory_stats_cuda_without_gpu_is_a_user_error", function()
    if has_gpu then
      local s = memory.stats("cuda:0")
      assert(s.device_memory and s.device_memory.total > 0, "device_memory missing on a GPU")
    else
      user_error(function() return memory.stats("cuda:0") end, no_gpu_words)
      user_error(function() return memory.snapshot("/tmp/never.json", "cuda:0") end, no_gpu_words)
      user_error(function() return memory.report("cuda") end, no_gpu_words)
    end
    assert(memory.stats().device_memory == nil, "the CPU has no device figures")
  end },
  { "to_on_the_cpu_is_unchanged", function()
    local x = T.from_table({ { 1.5, -2 }, { 3.25, 4 } })
    local b = x:to("bf16")
    assert(b:dtype() == "bf16" and b:device() == "cpu" and b:tag() == x:tag())
    same(b:values(), { 1.5, -2, 3.25, 4 })
    local c = x:to("cpu")
    assert(c:dtype() == "f32" and c:device() == "cpu")
    same(c:values(), x:values())
    local d = b:to({ dtype = "f32", tag = "weights", device = "cpu" })
    assert(d:tag() == "weights" and d:dtype() == "f32")
    same(d:values(), x:values())
    local i = T.from_table({ 7, -8 }, { dtype = "i64" }):to("i32")
    same(i:tolist(), { 7, -8 })
    for _, t in ipairs({ x, b, c, d, i }) do t:free() end
  end },
  { "to_rejects_bad_specs", function()
    local x = T.from_table({ 1 })
    user_error(function() return x:to({ devcie = "cuda" }) end, { "devcie", "device" })
    user_error(function() return x:to(5) end, { "tensor:to", "number" })
    user_error(function() return x:to("cuda:x") end, { "cuda:x", "cuda:N" })
    x:free()
  end },
  { "a_device_copy_names_function_and_device", function()
    -- A header that claims cuda:0: the copy reaches core/cuda_device/cuda_copy.c, whose message
    -- names the function, the direction and the device whatever went wrong there.
    if has_gpu then return end
    local h = T.from_table({ 1, 2 })
    local backing = ffi.new("float[2]")
    local fake = ffi.new("tr_tensor")
    fake.data, fake.ndim, fake.numel, fake.dtype, fake.device, fake.tag = backing, 1, 2, 0, 0, 3
    fake.shape[0] = 2
    assert(C.tr_tensor_copy(runtime.ctx, fake, h:ptr()) ~= 0, "copy to a fake cuda:0 tensor succeeded")
    local msg = ffi.string(C.tr_ctx_errmsg(runtime.ctx))
    assert(msg:find("tr_tensor_copy to cuda:0: ", 1, true), msg)
    assert(C.tr_tensor_fill(runtime.ctx, fake, 1) ~= 0)
    msg = ffi.string(C.tr_ctx_errmsg(runtime.ctx))
    assert(msg:find("tr_tensor_fill on cuda:0: ", 1, true), msg)
    assert(C.tr_tensor_read(runtime.ctx, fake, backing, 8) ~= 0)
    msg = ffi.string(C.tr_ctx_errmsg(runtime.ctx))
    assert(msg:find("tr_tensor_read from cuda:0: ", 1, true), msg)
    assert(backing[0] == 0 and backing[1] == 0, "the fake tensor's memory was written")
    h:free()
  end },
  { "safetensors_to_cuda_without_gpu_is_a_user_error", function()
    local dir = lib.tmpdir()
    local path = dir .. "/w.safetensors"
    local w = T.from_table({ 1, 2, 3, 4 })
    st.save(path, { w = w })
    local r = st.load(path)
    if has_gpu then
      local d = r:tensor("w", { device = "cuda", dtype = "bf16" })
      same(d:tolist(), { 1, 2, 3, 4 })
      d:free()
    else
      user_error(function() return r:tensor("w", { device = "cuda" }) end, no_gpu_words)
    end
    local back = r:tensor("w", { dtype = "bf16" })   -- the CPU path still converts
    same(back:tolist(), { 1, 2, 3, 4 })
    back:free()
    r:close()
    w:free()
    os.remove(path)
    os.remove(dir)
  end },
}
