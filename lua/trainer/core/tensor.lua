-- trainer.core.tensor: tensors in Lua. A Tensor is a small Lua table around a C tr_tensor*
-- (core/tensor/tensor.h). Memory is released by t:free(), deterministically; the garbage
-- collector only frees what a program forgot (a safety net, never the mechanism).
-- Using a tensor after free() is an error that says so, never a crash.
--
--   local T = trainer.tensor
--   local x = T.zeros({ 1024, 1024 }, { dtype = "bf16", device = "cpu", tag = "activations" })
--   x:shape() --> { 1024, 1024 }   x:dtype() --> "bf16"   x:nbytes() --> 2097152
--   x:free()
-- Constructors: zeros, ones, full, empty, randn, arange, from_table; all take
-- { dtype = "f32"|"bf16"|"f16"|"i32"|"i64", device = "cpu"|"cuda[:N]", tag = <memory tag> }.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local errors = require("trainer.core.errors")

local M = {}

local Tensor = {}
Tensor.__index = Tensor
M.Tensor = Tensor

local float_dtypes = { f32 = true, bf16 = true, f16 = true }

-- ---------------------------------------------------------------- options
local function dtype_of(name, what)
  local d = C.tr_dtype_from_name(name or "f32")
  if d < 0 then errors.user("%s: unknown dtype %q (use f32, bf16, f16, i32 or i64)", what, tostring(name)) end
  return d
end

local function tag_of(name, what)
  local t = C.tr_tag_from_name(name or "activations")
  if t < 0 then
    errors.user("%s: unknown tag %q (use weights, grads, optimizer, activations or workspace)", what, tostring(name))
  end
  return t
end

local function shape_of(shape, what)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then errors.user("%s: shape must be a table of sizes such as {2, 3}", what) end
  if #shape > 8 then errors.user("%s: at most 8 dimensions, got %d", what, #shape) end
  local dims = ffi.new("int64_t[8]")
  for i, n in ipairs(shape) do
    if type(n) ~= "number" or n < 0 or n ~= math.floor(n) then
      errors.user("%s: dimension %d must be a non-negative integer, got %s", what, i, tostring(n))
    end
    dims[i - 1] = n
  end
  return #shape, dims
end

-- ---------------------------------------------------------------- scopes
-- T.scope(fn, ...) runs fn(...) and frees every tensor made while it ran (by any
-- constructor, op or view: they all pass through wrap below) except
--   * the tensors fn returns, found among its return values and inside plain tables
--     (no metatable) among them: they pass to the enclosing scope, or to the caller when
--     there is none;
--   * the tensors marked with T.keep(t): they are owned by a longer-lived object (a
--     parameter, a gradient, optimizer state, a module's saved activations, a cache) and
--     leave every scope; whoever keeps them frees them.
-- When fn raises, everything it made (kept tensors aside) is freed and the error raised
-- again, unchanged. Scopes nest; the frees happen when fn returns, in the reverse order
-- of creation, so a scope frees no later than the hand-written frees it replaces only when
-- it is as narrow as they were: wrap each step whose temporaries die early in its own scope.
-- Freeing is the allocator's host-side bookkeeping: a scope adds no device round trip.
-- fn must not yield a coroutine across the scope.
--
-- Each tensor made inside a scope carries the scope's list in its _scope field; a tensor
-- that leaves a scope (returned, kept) gets its new owner's list or nil, so an exit frees
-- exactly the tensors whose _scope is still its own list.
local scopes, open_scopes = {}, 0

local function wrap(ptr, what)
  if ptr == nil then runtime.raise(what) end
  ffi.gc(ptr, C.tr_tensor_free)
  local t = setmetatable({ _t = ptr }, Tensor)
  if open_scopes > 0 then
    local s = scopes[open_scopes]
    s[#s + 1] = t
    t._scope = s
  end
  return t
end
M.wrap = wrap

-- Marks tensors as owned by a longer-lived object: no scope frees them. Returns its
-- arguments, so `self.cache = T.keep(ops.foo(x))` reads as one statement.
function M.keep(...)
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if type(t) == "table" and rawget(t, "_scope") ~= nil then t._scope = nil end
  end
  return ...
end

-- Moves v (a returned value) out of scope s: a tensor of s to the enclosing scope (or to
-- no scope), a plain table's tensors likewise, recursively.
local function hand_up(s, v, seen)
  if type(v) ~= "table" then return end
  if getmetatable(v) == Tensor then
    if rawget(v, "_scope") == s then
      local parent = scopes[open_scopes]
      if parent then parent[#parent + 1] = v end
      v._scope = parent
    end
    return
  end
  if getmetatable(v) ~= nil then return end
  seen = seen or {}
  if seen[v] then return end
  seen[v] = true
  for _, item in pairs(v) do hand_up(s, item, seen) end
end

local function close_scope(s, ok, ...)
  scopes[open_scopes] = nil
  open_scopes = open_scopes - 1
  if ok then
    for i = 1, select("#", ...) do hand_up(s, (select(i, ...))) end
  end
  for i = #s, 1, -1 do
    local t = s[i]
    if rawget(t, "_scope") == s then
      t._scope = nil
      t:free()
    end
  end
  if not ok then error((...), 0) end
  return ...
end

function M.scope(fn, ...)
  open_scopes = open_scopes + 1
  local s = {}
  scopes[open_scopes] = s
  return close_scope(s, pcall(fn, ...))
end

-- How many scopes are open (tests).
function M.scope_depth() return open_scopes end

-- The live C tensor, or an error if it was freed.
function Tensor:ptr()
  local t = rawget(self, "_t")
  if t == nil then errors.user("this tensor was freed with :free() and cannot be used any more") end
  return t
end

function M.is_tensor(x) return getmetatable(x) == Tensor end

local function new(shape, opts, what)
  opts = opts or {}
  local ndim, dims = shape_of(shape, what)
  local ptr = C.tr_tensor_new(runtime.ctx, ndim, dims, dtype_of(opts.dtype, what),
    runtime.parse_device(opts.device), tag_of(opts.tag, what))
  return wrap(ptr, what)
end

-- ---------------------------------------------------------------- constructors
function M.empty(shape, opts) return new(shape, opts, "tensor.empty") end

function M.full(shape, value, opts)
  local t = new(shape, opts, "tensor.full")
  runtime.check(C.tr_tensor_fill(runtime.ctx, t:ptr(), value), "tensor.full")
  return t
end

function M.zeros(shape, opts) return M.full(shape, 0, opts) end
function M.ones(shape, opts) return M.full(shape, 1, opts) end

-- Host values (a flat Lua array) into a new tensor of shape and opts.
local function from_values(values, shape, opts, what)
  opts = opts or {}
  local dtype = opts.dtype or "f32"
  local is_float = float_dtypes[dtype]
  local host = new(shape, { dtype = is_float and "f32" or "i64", tag = opts.tag }, what)
  local n = #values
  local buf = ffi.new(is_float and "float[?]" or "int64_t[?]", math.max(n, 1))
  for i = 1, n do buf[i - 1] = values[i] end
  runtime.check(C.tr_tensor_write(runtime.ctx, host:ptr(), buf, n * (is_float and 4 or 8)), what)
  if dtype == (is_float and "f32" or "i64") and (opts.device == nil or opts.device == "cpu") then return host end
  local out = host:to(opts)
  host:free()
  return out
end

-- Nested Lua tables of numbers: {{1, 2}, {3, 4}} -> a 2 x 2 tensor.
function M.from_table(tbl, opts)
  local shape, values = {}, {}
  local function probe(t, depth)
    if type(t) == "table" then
      shape[depth] = #t
      if #t > 0 then probe(t[1], depth + 1) end
    end
  end
  if type(tbl) == "number" then tbl = { tbl } end
  probe(tbl, 1)
  local function flatten(t, depth, path)
    if depth > #shape then
      if type(t) ~= "number" then errors.user("tensor.from_table: element %s is %s, not a number", path, type(t)) end
      values[#values + 1] = t
      return
    end
    if type(t) ~= "table" or #t ~= shape[depth] then
      errors.user("tensor.from_table: ragged nesting at %s: expected %d items", path, shape[depth])
    end
    for i = 1, #t do flatten(t[i], depth + 1, path .. "[" .. i .. "]") end
  end
  flatten(tbl, 1, "")
  return from_values(values, shape, opts, "tensor.from_table")
end

-- arange(n) or arange(start, stop[, step]), then an optional opts table.
function M.arange(a, b, c, d)
  local start, stop, step, opts
  if type(b) ~= "number" then start, stop, step, opts = 0, a, 1, b
  elseif type(c) ~= "number" then start, stop, step, opts = a, b, 1, c
  else start, stop, step, opts = a, b, c, d end
  if step == 0 then errors.user("tensor.arange: step must not be 0") end
  local values = {}
  local x = start
  while (step > 0 and x < stop) or (step < 0 and x > stop) do
    values[#values + 1] = x
    x = x + step
  end
  return from_values(values, { #values }, opts, "tensor.arange")
end

-- Random values from the keyed RNG, the one initialiser every random weight goes through
-- (randn, the LoRA A matrices, the SoftmaxLoss classifier): key { seed = opts.seed
-- (default 0), op = opts.stream (default 0; the streams are in trainer.core.rng_sites) }.
-- opts.dist: "normal" (default; mean 0, variance 1) or "uniform" (U(-opts.bound, opts.bound),
-- bound default 1: (2u - 1) * bound of the RNG's u in [0, 1)). Drawn in f32 on the CPU, then
-- converted to opts.dtype / opts.device; opts.tag for both. `what` names the caller in errors.
function M.random(shape, opts, what)
  opts = opts or {}
  what = what or "tensor.random"
  local ndim, dims = shape_of(shape, what)
  local n = 1
  for i = 0, ndim - 1 do n = n * tonumber(dims[i]) end
  local key = ffi.new("tr_rng_key")
  key.seed = opts.seed or 0
  key.op = opts.stream or 0
  local dist = opts.dist or "normal"
  if dist ~= "normal" and dist ~= "uniform" then
    errors.user("%s: dist must be \"normal\" or \"uniform\", got %s", what, tostring(dist))
  end
  -- drawn straight into the host tensor: a buffer on LuaJIT's heap (a word embedding's 77 MB)
  -- would live until a garbage collection, whose timing then decided the process's peak RSS
  local host = new(shape, { dtype = "f32", tag = opts.tag }, what)
  local buf = ffi.cast("float *", host:ptr().data)
  if dist == "normal" then
    C.tr_rng_normal(buf, n, key, 0)
  else
    C.tr_rng_uniform(buf, n, key, 0)
    local bound = opts.bound or 1
    for i = 0, n - 1 do buf[i] = (2 * buf[i] - 1) * bound end
  end
  if (opts.dtype or "f32") == "f32" and (opts.device == nil or opts.device == "cpu") then return host end
  local out = host:to({ dtype = opts.dtype, device = opts.device, tag = opts.tag })
  host:free()
  return out
end

-- Standard normal values: opts.seed (default 0) and opts.stream (default: a counter, so
-- successive calls differ) select the numbers; see M.random.
function M.randn(shape, opts)
  opts = opts or {}
  runtime.randn_calls = (runtime.randn_calls or 0) + 1
  return M.random(shape, { seed = opts.seed, stream = opts.stream or runtime.randn_calls, dist = "normal",
    dtype = opts.dtype, device = opts.device, tag = opts.tag }, "tensor.randn")
end

-- ---------------------------------------------------------------- properties
function Tensor:shape()
  local t = self:ptr()
  local s = {}
  for i = 0, t.ndim - 1 do s[i + 1] = tonumber(t.shape[i]) end
  return s
end
function Tensor:ndim() return tonumber(self:ptr().ndim) end
function Tensor:dtype() return ffi.string(C.tr_dtype_name(self:ptr().dtype)) end
function Tensor:device() return runtime.device_name(self:ptr().device) end
function Tensor:tag() return ffi.string(C.tr_tag_name(self:ptr().tag)) end
function Tensor:numel() return tonumber(self:ptr().numel) end
function Tensor:nbytes() return tonumber(C.tr_tensor_nbytes(self:ptr())) end
function Tensor:is_freed() return rawget(self, "_t") == nil end

-- ---------------------------------------------------------------- lifetime
function Tensor:free()
  local t = rawget(self, "_t")
  if t ~= nil then
    ffi.gc(t, nil)
    C.tr_tensor_free(t)
    self._t = nil
  end
end

-- A copy with other dtype / device / tag: t:to("bf16"), t:to("cuda"), t:to("cuda:1"),
-- t:to("cpu"), t:to{ dtype =, device =, tag = }. Between devices the copy is
-- core/tensor/tensor.c's tr_tensor_copy: to or from the host it has finished when :to
-- returns; GPU to GPU it is queued on the destination's stream. A dtype change on the way is
-- done on the host, in chunks through the pinned staging buffers (core/cuda_device/cuda_copy.c),
-- until the CUDA cast op is used there.
local to_keys = { dtype = true, device = true, tag = true }
function Tensor:to(spec)
  local opts = {}
  if type(spec) == "string" then
    if C.tr_dtype_from_name(spec) >= 0 then opts.dtype = spec else opts.device = spec end
  elseif type(spec) == "table" then
    for k in pairs(spec) do
      if not to_keys[k] then
        errors.user("tensor:to: unknown option %q (use dtype, device and tag, as in t:to{ device = \"cuda\" })",
          tostring(k))
      end
    end
    opts = { dtype = spec.dtype, device = spec.device, tag = spec.tag }   -- the caller's table stays as it was
  elseif spec ~= nil then
    errors.user("tensor:to: expected a dtype, a device or { dtype =, device =, tag = }, got %s", type(spec))
  end
  if opts.device ~= nil then opts.device = runtime.device_name(runtime.parse_device(opts.device)) end
  local src = self:ptr()
  local out = new(self:shape(), {
    dtype = opts.dtype or self:dtype(), device = opts.device or self:device(), tag = opts.tag or self:tag(),
  }, "tensor:to")
  runtime.check(C.tr_tensor_copy(runtime.ctx, out:ptr(), src), "tensor:to")
  return out
end

function Tensor:clone() return self:to({}) end

-- Views share the storage and keep it alive after the original is freed.
function Tensor:reshape(shape)
  local ndim, dims = shape_of(shape, "tensor:reshape")
  return wrap(C.tr_tensor_reshape(runtime.ctx, self:ptr(), ndim, dims), "tensor:reshape")
end

function Tensor:narrow(start, length)
  return wrap(C.tr_tensor_narrow(runtime.ctx, self:ptr(), start, length), "tensor:narrow")
end

function Tensor:fill(value)
  runtime.check(C.tr_tensor_fill(runtime.ctx, self:ptr(), value), "tensor:fill")
  return self
end

-- ---------------------------------------------------------------- reading values
M.max_tolist = 1e6

-- Flat host copy of the values as Lua numbers (floats through f32, ints through i64). A
-- tensor on a GPU is copied down first; the copy waits for the device's stream, so the
-- values are those of every op queued before (tolist, item and printing all come here).
function Tensor:values()
  local n = self:numel()
  if n > M.max_tolist then
    errors.user("tensor:tolist: %d elements is too many to turn into a Lua table (limit %d)", n, M.max_tolist)
  end
  local is_float = float_dtypes[self:dtype()]
  local host = self
  if self:device() ~= "cpu" or self:dtype() ~= (is_float and "f32" or "i64") then
    host = self:to({ dtype = is_float and "f32" or "i64", device = "cpu", tag = "workspace" })
  end
  local buf = ffi.new(is_float and "float[?]" or "int64_t[?]", math.max(n, 1))
  runtime.check(C.tr_tensor_read(runtime.ctx, host:ptr(), buf, n * (is_float and 4 or 8)), "tensor:tolist")
  if host ~= self then host:free() end
  local out = {}
  for i = 1, n do out[i] = tonumber(buf[i - 1]) end
  return out
end

function Tensor:tolist()
  local values, shape = self:values(), self:shape()
  if #shape == 0 then return values[1] end
  local pos = 0
  local function build(depth)
    local t = {}
    for i = 1, shape[depth] do
      if depth == #shape then pos = pos + 1; t[i] = values[pos]
      else t[i] = build(depth + 1) end
    end
    return t
  end
  return build(1)
end

function Tensor:item()
  if self:numel() ~= 1 then errors.user("tensor:item: the tensor has %d elements, not 1", self:numel()) end
  return self:values()[1]
end

-- ---------------------------------------------------------------- printing
local function fmt_number(x, is_float)
  if not is_float then return ("%d"):format(x) end
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" end
  if x == -math.huge then return "-inf" end
  local s = ("%.4f"):format(x)
  s = s:gsub("0+$", ""):gsub("%.$", ".")
  if math.abs(x) >= 1e5 or (x ~= 0 and math.abs(x) < 1e-4) then s = ("%.4e"):format(x) end
  return s
end

-- Like PyTorch: at most 3 items at each end of a dimension when the tensor is large.
function Tensor.__tostring(self)
  if rawget(self, "_t") == nil then return "tensor(<freed>)" end
  local shape, n = self:shape(), self:numel()
  local is_float = float_dtypes[self:dtype()]
  local suffix = ("dtype=%s, device=%s, tag=%s"):format(self:dtype(), self:device(), self:tag())
  if n > M.max_tolist then
    return ("tensor(<%s>, %s)"):format(table.concat(shape, "x"), suffix)
  end
  local values = self:values()
  if #shape == 0 then return ("tensor(%s, %s)"):format(fmt_number(values[1], is_float), suffix) end
  local summarize = n > 1000
  local strides = {}
  local acc = 1
  for d = #shape, 1, -1 do strides[d] = acc; acc = acc * shape[d] end
  local function render(depth, offset, indent)
    local items = {}
    local size = shape[depth]
    local function item(i)
      if depth == #shape then return fmt_number(values[offset + i + 1], is_float) end
      return render(depth + 1, offset + i * strides[depth], indent .. " ")
    end
    if summarize and size > 6 then
      for i = 0, 2 do items[#items + 1] = item(i) end
      items[#items + 1] = "..."
      for i = size - 3, size - 1 do items[#items + 1] = item(i) end
    else
      for i = 0, size - 1 do items[#items + 1] = item(i) end
    end
    local sep = depth == #shape and ", " or (",\n" .. indent .. " ")
    return "[" .. table.concat(items, sep) .. "]"
  end
  return ("tensor(%s, %s)"):format(render(1, 0, "       "), suffix)
end

return M
