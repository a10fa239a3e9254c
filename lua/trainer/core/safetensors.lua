-- trainer.core.safetensors: Hugging Face safetensors files from Lua, over core/io/safetensors.h.
--
--   local st = require("trainer.core.safetensors")
--   local r = st.load("models/x")            -- a .safetensors file, an index .json, or a folder
--   for _, name in ipairs(r:names()) do ... end          -- file (or weight-map) order
--   r:info(name)   --> { dtype = "F32", shape = {..}, numel = n, shard = k }
--   local w = r:tensor(name, { dtype = "f32", tag = "weights", device = "cpu" })  -- a new tensor
--   r:read_into(name, w)                     -- into an existing tensor (no second copy)
--   r:metadata()   --> { format = "pt", ... }
--   r:close()
--   st.save(path, { name = tensor, ... } or { { name, tensor }, ... }, { key = "value" })
--
-- The mapping is read-only: tensor() always copies (and converts F32/BF16/F16/I32/I64 file
-- data to the dtype asked for). To a GPU (device = "cuda[:N]") the values go from the
-- mapping in chunks of 8 MiB, converted on the host into pinned staging buffers and
-- uploaded from there: no second full host copy. Errors name the file. The reader must be closed with
-- :close(); the GC closes a forgotten one as a safety net only.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")

local M = {}

local Reader = {}
Reader.__index = Reader

local fs = require("trainer.core.fs")
local is_dir, exists = fs.is_dir, fs.exists

-- ---------------------------------------------------------------- reading
-- path: a .safetensors file, a model.safetensors.index.json, or a folder holding either.
function M.load(path)
  if type(path) ~= "string" then errors.user("safetensors.load(path): path must be a string") end
  local err = ffi.new("tr_error")
  local sharded = is_dir(path) or path:match("%.json$")
  if is_dir(path) and not exists(path .. "/model.safetensors") and not exists(path .. "/model.safetensors.index.json") then
    errors.user("%s: no model.safetensors or model.safetensors.index.json in this folder (a model folder holds " ..
      "config.json and its weights as model.safetensors or as shards listed by model.safetensors.index.json)", path)
  end
  if not sharded and not exists(path) then errors.user("%s: no such file", path) end
  local self = setmetatable({ path = path, _sharded = sharded and true or false }, Reader)
  if sharded then
    local out = ffi.new("tr_st_sharded*[1]")
    if C.tr_st_sharded_open(out, path, err) ~= 0 then errors.user("%s", ffi.string(err.msg)) end
    self._h = ffi.gc(out[0], C.tr_st_sharded_close)
  else
    local out = ffi.new("tr_st_file*[1]")
    if C.tr_st_open(out, path, err) ~= 0 then errors.user("%s", ffi.string(err.msg)) end
    self._h = ffi.gc(out[0], C.tr_st_close)
  end
  return self
end

function Reader:_handle()
  if self._h == nil then errors.user("%s: this safetensors reader was closed", self.path) end
  return self._h
end

function Reader:close() runtime.release(self, "_h", self._sharded and C.tr_st_sharded_close or C.tr_st_close) end

function Reader:count()
  local h = self:_handle()
  return tonumber(self._sharded and C.tr_st_sharded_count(h) or C.tr_st_count(h))
end

local function get(self, i, info)
  local h = self:_handle()
  local rc = self._sharded and C.tr_st_sharded_get(h, i, info) or C.tr_st_get(h, i, info)
  if rc ~= 0 then errors.user("%s: no tensor number %d", self.path, i) end
end

function Reader:names()
  local out, info = {}, ffi.new("tr_st_info")
  for i = 0, self:count() - 1 do
    get(self, i, info)
    out[#out + 1] = ffi.string(info.name)
  end
  return out
end

function Reader:has(name)
  local h = self:_handle()
  return (self._sharded and C.tr_st_sharded_find(h, name) or C.tr_st_find(h, name)) >= 0
end

local function lookup(self, name)
  local h, info, err = self:_handle(), ffi.new("tr_st_info"), ffi.new("tr_error")
  local rc
  if self._sharded then rc = C.tr_st_sharded_lookup(h, name, info, err)
  else rc = C.tr_st_lookup(h, name, info, err) end
  if rc ~= 0 then errors.user("%s", ffi.string(err.msg)) end
  return info
end

-- The "__metadata__" pairs as a table (of the first shard for a sharded folder).
function Reader:metadata()
  local h = self:_handle()
  local f = self._sharded and C.tr_st_sharded_shard(h, 0) or h
  local out = {}
  if f == nil then return out end
  local k, v = ffi.new("const char*[1]"), ffi.new("const char*[1]")
  for i = 0, tonumber(C.tr_st_metadata_count(f)) - 1 do
    if C.tr_st_metadata_at(f, i, k, v) == 0 then out[ffi.string(k[0])] = ffi.string(v[0]) end
  end
  return out
end

-- { dtype = "F32", shape = {...}, numel = n, shard = k } or nil when there is no such tensor.
function Reader:info(name)
  if not self:has(name) then return nil end
  local info = lookup(self, name)
  local shape = {}
  for d = 0, info.ndim - 1 do shape[d + 1] = tonumber(info.shape[d]) end
  return { dtype = ffi.string(info.dtype_name), shape = shape, numel = tonumber(info.numel), shard = tonumber(info.shard) }
end

-- A new tensor holding NAME's values; opts: dtype (default: the file's), device, tag
-- (default "weights").
function Reader:tensor(name, opts)
  opts = opts or {}
  local info = lookup(self, name)
  if info.dtype < 0 then
    errors.user("%s: tensor %s has dtype %s, which trainer cannot hold (use F32, BF16, F16, I32 or I64)",
      self.path, name, ffi.string(info.dtype_name))
  end
  local shape = {}
  for d = 0, info.ndim - 1 do shape[d + 1] = tonumber(info.shape[d]) end
  local file_dtype = ffi.string(C.tr_dtype_name(info.dtype))
  local dtype, device = opts.dtype or file_dtype, opts.device or "cpu"
  if runtime.parse_device(device) ~= C.TR_CPU then
    -- Straight from the mapping into the device tensor: converted on the host a chunk at a
    -- time into the pinned staging and uploaded from there (core/cuda_device/cuda_copy.c), so
    -- the file is never copied whole into host memory.
    local out = T.empty(shape, { dtype = dtype, device = device, tag = opts.tag or "weights" })
    local rc = C.tr_tensor_write_converted(runtime.ctx, out:ptr(), info.data, info.dtype, info.numel)
    if rc ~= 0 then out:free(); runtime.raise(self.path .. ": " .. name) end
    return out
  end
  local direct = dtype == file_dtype and device == "cpu"
  -- a staging copy that is converted and freed is workspace, not a second set of weights
  local host = T.empty(shape, { dtype = file_dtype, tag = direct and (opts.tag or "weights") or "workspace" })
  runtime.check(C.tr_tensor_write(runtime.ctx, host:ptr(), info.data, info.nbytes), self.path .. ": " .. name)
  if direct then return host end
  local out = host:to({ dtype = dtype, device = device, tag = opts.tag or "weights" })
  host:free()
  return out
end

-- Copies NAME's values into the existing tensor dst (same numel; the file's dtype is
-- converted to dst's). A CPU tensor of the file's dtype is written straight from the
-- mapping; otherwise one staging copy, tagged workspace, lives until the conversion is done.
-- Loading into the parameters this way keeps the weights ledger at the parameters' bytes.
function Reader:read_into(name, dst)
  local info = lookup(self, name)
  if info.dtype < 0 then
    errors.user("%s: tensor %s has dtype %s, which trainer cannot hold (use F32, BF16, F16, I32 or I64)",
      self.path, name, ffi.string(info.dtype_name))
  end
  if tonumber(info.numel) ~= dst:numel() then
    errors.user("%s: tensor %s has %d elements, the tensor to fill has %d", self.path, name, tonumber(info.numel),
      dst:numel())
  end
  local file_dtype = ffi.string(C.tr_dtype_name(info.dtype))
  if dst:device() ~= "cpu" then   -- from the mapping through the pinned staging, as tensor() does
    runtime.check(C.tr_tensor_write_converted(runtime.ctx, dst:ptr(), info.data, info.dtype, info.numel),
      self.path .. ": " .. name)
    return dst
  end
  if file_dtype == dst:dtype() and dst:device() == "cpu" then
    runtime.check(C.tr_tensor_write(runtime.ctx, dst:ptr(), info.data, info.nbytes), self.path .. ": " .. name)
    return dst
  end
  local shape = {}
  for d = 0, info.ndim - 1 do shape[d + 1] = tonumber(info.shape[d]) end
  local host = T.empty(shape, { dtype = file_dtype, tag = "workspace" })
  local ok, err = pcall(function()
    runtime.check(C.tr_tensor_write(runtime.ctx, host:ptr(), info.data, info.nbytes), self.path .. ": " .. name)
    runtime.check(C.tr_tensor_copy(runtime.ctx, dst:ptr(), host:ptr()), self.path .. ": " .. name)
  end)
  host:free()
  if not ok then error(err, 0) end
  return dst
end

-- ---------------------------------------------------------------- writing
-- tensors: { name = tensor } (written in the reference writer's order anyway) or an
-- ordered list { { name, tensor }, ... }; metadata: { key = "value" } (strings).
local function entries_of(path, tensors, metadata)
  local list = {}
  if tensors[1] ~= nil then
    for _, pair in ipairs(tensors) do list[#list + 1] = { pair[1], pair[2] } end
  else
    for name, t in pairs(tensors) do list[#list + 1] = { name, t } end
    table.sort(list, function(a, b) return a[1] < b[1] end)
  end
  local n = #list
  local entries = ffi.new("tr_st_entry[?]", math.max(n, 1))
  -- A tensor on a GPU is not copied down whole: the writer reads it a chunk at a time
  -- (tr_st_write_tensors), so saving a GPU's weights needs no host copy of them.
  local sources = ffi.new("const tr_tensor*[?]", math.max(n, 1))
  local keep = {}   -- name strings alive until the C call returns
  for i, pair in ipairs(list) do
    local name, t = pair[1], pair[2]
    if type(name) ~= "string" or not T.is_tensor(t) then
      errors.user("%s: safetensors.save needs name -> tensor pairs; entry %d is %s -> %s", path, i,
        tostring(name), type(t))
    end
    local cname = ffi.new("char[?]", #name + 1, name)
    keep[#keep + 1] = cname
    local e = entries[i - 1]
    e.name = cname
    e.dtype = C.tr_st_dtype_from_tr(t:ptr().dtype)
    local shape = t:shape()
    e.ndim = #shape
    for d = 1, #shape do e.shape[d - 1] = shape[d] end
    e.data = t:ptr().data   -- on a GPU only a non-NULL marker: the writer reads sources[i]
    if t:device() ~= "cpu" then sources[i - 1] = t:ptr() end
  end
  local meta_keys = {}
  for k in pairs(metadata or {}) do meta_keys[#meta_keys + 1] = k end
  table.sort(meta_keys)
  local meta = ffi.new("const char*[?]", math.max(2 * #meta_keys, 1))
  for i, k in ipairs(meta_keys) do
    local kk, vv = tostring(k), tostring(metadata[k])
    local ck, cv = ffi.new("char[?]", #kk + 1, kk), ffi.new("char[?]", #vv + 1, vv)
    keep[#keep + 1] = ck; keep[#keep + 1] = cv
    meta[2 * i - 2], meta[2 * i - 1] = ck, cv
  end
  return entries, n, meta, #meta_keys, keep, sources
end

function M.save(path, tensors, metadata)
  if type(path) ~= "string" or type(tensors) ~= "table" then
    errors.user("safetensors.save(path, tensors[, metadata]): path a string, tensors a table")
  end
  local entries, n, meta, nmeta, keep, sources = entries_of(path, tensors, metadata)
  local err = ffi.new("tr_error")
  local rc = C.tr_st_write_tensors(runtime.ctx, path, entries, sources, n, nmeta > 0 and meta or nil, nmeta, err)
  local _ = keep   -- the names stay referenced (alive) until here
  if rc == C.TR_EOOM then errors.oom(ffi.string(err.msg)) end
  if rc ~= 0 then errors.user("%s", ffi.string(err.msg)) end
  return path
end

return M
