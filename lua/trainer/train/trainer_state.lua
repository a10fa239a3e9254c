-- trainer.train.trainer_state: reads and validates a checkpoint's trainer_state for resume.
--
--   local meta, tensors = require("trainer.train.trainer_state").read(dir, {
--     optimizer = opt, batches_per_epoch = n, device = "cpu", scratch = out })
--
-- trainer_state is a gzip stream of a safetensors file (see trainer.outputs): optimizer
-- tensors "optimizer.<param>.<slot>" and, in __metadata__.trainer_state, JSON with step,
-- micro, epoch, tokens, train_time, data, scaler, rng, optimizer, total_steps, last_loss,
-- first_eval, last_eval, and the run's peaks and wall_time up to the checkpoint. The file is treated as untrusted input, as the safetensors
-- reader treats a header:
--   * the decompressed size is bounded (what an optimizer's state of this model can take
--     plus 16 MiB for the header) while it is read, so a gzip bomb ends early;
--   * the safetensors layer (core/io/safetensors.c) checks the header length against the
--     file before reading it, then offsets, dtypes and shapes;
--   * every JSON field is typed and ranged, and every tensor's name, dtype and shape is
--     checked against the model's parameters and the optimizer's slots.
-- Anything wrong raises one user error: "DIR/trainer_state is damaged (WHAT); resume from
-- checkpoint-K, the previous one" (or, with no earlier checkpoint, how to start over).
-- The decompressed temporary file is removed on every path. Returned tensors (tag
-- "optimizer") belong to the caller, who frees them.
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local sys = require("trainer.core.sys")

local M = {}

-- Room for the safetensors header and the metadata JSON beyond the tensors' bytes.
M.HEADER_ALLOWANCE = 16 * 1024 * 1024
-- Counters above 2^53 are not exact in JSON numbers; far below that is any real run.
local MAX_COUNT = 2 ^ 53

-- A failure of the state file: carries WHAT until read() names the file around it.
local Damage = {}
local function damaged(fmt, ...)
  error(setmetatable({ what = select("#", ...) > 0 and fmt:format(...) or fmt }, Damage), 0)
end

-- ---------------------------------------------------------------- message
-- The checkpoint before dir in its run folder, or nil.
local function previous_checkpoint(dir)
  local parent, step = dir:match("^(.*)/checkpoint%-(%d+)/*$")
  if not parent then return nil end
  local best
  for _, c in ipairs(require("trainer.train.outputs").checkpoints(parent)) do
    if c.step < tonumber(step) and sys.is_dir(c.dir) then best = c end
  end
  return best and best.dir or nil
end

function M.damage_message(dir, what)
  local prev = previous_checkpoint(dir)
  local advice
  if prev then
    advice = ("resume from %s, the previous one (resume=%s)"):format(prev:match("[^/]+$"), prev)
  else
    advice = "no earlier checkpoint is left beside it: start the run again without resume (resume=nil)"
  end
  return ("%s/trainer_state is damaged (%s); %s"):format(dir, what, advice)
end

-- ---------------------------------------------------------------- gzip, bounded
-- The decompressed bytes of path, or a damage error (past `limit` bytes: more than this
-- model's optimizer state can take).
local function gunzip_bounded(path, limit)
  local bytes, why = require("trainer.train.outputs").gunzip(path, limit)
  if not bytes then damaged("%s", why) end
  return bytes
end

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v >= 0 and v <= MAX_COUNT end
local function is_finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end
local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if v == nil or v == json.null then return "nothing" end
  if type(v) == "table" then return "a table" end
  return tostring(v)
end

local function count(tbl, key, where, lo, hi)
  local v = tbl[key]
  if type(v) ~= "number" or v ~= math.floor(v) then
    damaged("%s%s is %s where a whole number >= 0 belongs", where, key, show(v))
  end
  if v < 0 then damaged("%s%s = %s is negative", where, key, show(v)) end
  if v > MAX_COUNT then damaged("%s%s = %s is beyond any real run (above 2^53)", where, key, show(v)) end
  if lo and v < lo then damaged("%s%s = %d is below %d", where, key, v, lo) end
  if hi and v > hi then damaged("%s%s = %d is above %d", where, key, v, hi) end
  return v
end

local function number(tbl, key, where, optional)
  local v = tbl[key]
  if optional and (v == nil or v == json.null) then tbl[key] = nil return nil end
  if not is_finite(v) or v < 0 then damaged("%s%s is %s where a finite number >= 0 belongs", where, key, show(v)) end
  return v
end

local function object(tbl, key, where, optional)
  local v = tbl[key]
  if optional and (v == nil or v == json.null) then tbl[key] = nil return nil end
  if type(v) ~= "table" then damaged("%s%s is %s where an object belongs", where, key, show(v)) end
  return v
end

-- Scores such as { spearman = 0.8 }: names to finite numbers.
local function scores(tbl, key)
  local v = object(tbl, key, "", true)
  if v == nil then return end
  for k, x in pairs(v) do
    if type(k) ~= "string" or not is_finite(x) then damaged("%s.%s is %s where a number belongs", key, tostring(k), show(x)) end
  end
end

-- The step the folder's name says (checkpoint-STEP), or nil.
local function folder_step(dir)
  local n = dir:match("checkpoint%-(%d+)/*$")
  return n and tonumber(n) or nil
end

-- Checks meta in place; opts as read()'s.
local function check_meta(meta, dir, opts)
  -- the world size first: another one also changes the data cursor's bounds (trainer.dist)
  if opts.world then require("trainer.dist").check_resume(meta, opts.world, dir) end
  local step = count(meta, "step", "")
  local want = folder_step(dir)
  if want and step ~= want then damaged("step = %d but the folder is checkpoint-%d", step, want) end
  local micro = count(meta, "micro", "", step)
  count(meta, "epoch", "", 0, micro + 1)
  number(meta, "tokens", "")
  number(meta, "train_time", "")
  number(meta, "wall_time", "", true)
  local peaks = object(meta, "peaks", "", true)
  if peaks then
    number(peaks, "allocated", "peaks.")
    number(peaks, "reserved", "peaks.")
    local by_tag = object(peaks, "by_tag", "peaks.")
    for tag, v in pairs(by_tag) do
      if type(tag) ~= "string" or not is_finite(v) or v < 0 then
        damaged("peaks.by_tag.%s is %s where a number of bytes belongs", tostring(tag), show(v))
      end
    end
  end
  if meta.total_steps ~= nil then count(meta, "total_steps", "", 1) end
  if meta.last_loss == json.null then meta.last_loss = nil end
  if meta.last_loss ~= nil and type(meta.last_loss) ~= "number" then
    damaged("last_loss is %s where a number belongs", show(meta.last_loss))
  end
  scores(meta, "first_eval")
  scores(meta, "last_eval")

  local rng = object(meta, "rng", "")
  count(rng, "seed", "rng.")
  count(rng, "step", "rng.", 0, micro)

  local data = object(meta, "data", "")
  count(data, "epoch", "data.", 0, meta.epoch + 1)
  count(data, "position", "data.", 0, opts.batches_per_epoch)
  if data.seed ~= nil then count(data, "seed", "data.") end
  if type(data.rows) == "table" then   -- several datasets: rows by dataset name
    for name in pairs(data.rows) do count(data.rows, name, "data.rows.") end
  elseif data.rows ~= nil then count(data, "rows", "data.") end
  if data.batch_size ~= nil then count(data, "batch_size", "data.", 1) end

  -- a run under mpirun: its world size and each rank's data cursor (trainer.dist)
  if meta.dist ~= nil then
    local dd = object(meta, "dist", "")
    local n = count(dd, "world_size", "dist.", 1)
    local ranks = object(dd, "ranks", "dist.")
    if #ranks ~= n then damaged("dist.ranks has %d entries for a world of %d ranks", #ranks, n) end
  end

  local scaler = object(meta, "scaler", "")
  if next(scaler) ~= nil then
    local s = scaler.scale
    if not is_finite(s) or s <= 0 then damaged("scaler.scale is %s where a finite number > 0 belongs", show(s)) end
    if scaler.growth_tracker ~= nil then count(scaler, "growth_tracker", "scaler.") end
    if scaler.skipped ~= nil then count(scaler, "skipped", "scaler.") end
    if scaler.growth_interval ~= nil then count(scaler, "growth_interval", "scaler.", 1) end
    if scaler.enabled ~= nil and type(scaler.enabled) ~= "boolean" then
      damaged("scaler.enabled is %s where true or false belongs", show(scaler.enabled))
    end
  end

  local o = object(meta, "optimizer", "")
  if type(o.name) ~= "string" then damaged("optimizer.name is %s where a name belongs", show(o.name)) end
  local steps = count(o, "steps", "optimizer.", 0, step)
  local per = object(o, "step", "optimizer.")
  for pname, n in pairs(per) do
    if type(pname) ~= "string" then damaged("optimizer.step has a key %s where parameter names belong", show(pname)) end
    if not is_int(n) or n > steps then
      damaged("optimizer.step[%q] is %s where a whole number from 0 to optimizer.steps (%d) belongs", pname, show(n), steps)
    end
  end
end

-- ---------------------------------------------------------------- tensors
-- Checks every tensor of the reader against the model's parameters and the optimizer's
-- slots, then returns them as tensors { name = tensor } (tag optimizer).
local function check_tensors(reader, meta, opts)
  local optimizer = opts.optimizer
  local per = meta.optimizer.step
  local names = reader:names()
  local seen = {}
  for _, name in ipairs(names) do
    if name == "marker" then
      if #names ~= 1 then damaged("a marker tensor beside optimizer tensors") end
    else
      local pname, slot = name:match("^optimizer%.(.+)%.([%w_]+)$")
      if not pname then damaged("tensor %q is not named optimizer.<parameter>.<slot>", name) end
      if per[pname] == nil then damaged("tensor %q is of a parameter optimizer.step does not list", name) end
      local slots = optimizer and optimizer.slot_shapes and optimizer:slot_shapes(pname)
      if optimizer and optimizer.name == meta.optimizer.name then
        if not slots then damaged("tensor %q is of %s, which is not a trainable parameter of this model", name, pname) end
        local shape = slots[slot]
        if not shape then damaged("tensor %q: %s keeps no state %q", name, optimizer.name, slot) end
        local info = reader:info(name)
        if info.dtype ~= "F32" then damaged("tensor %q is %s where F32 belongs", name, info.dtype) end
        if table.concat(info.shape, ",") ~= table.concat(shape, ",") then
          damaged("tensor %q has shape [%s] where the parameter needs [%s]", name, table.concat(info.shape, ", "),
            table.concat(shape, ", "))
        end
      end
      seen[pname] = seen[pname] or {}
      seen[pname][slot] = true
    end
  end
  if optimizer and optimizer.name == meta.optimizer.name then
    for pname in pairs(per) do
      local slots = optimizer:slot_shapes(pname)
      if not slots then damaged("optimizer.step lists %s, which is not a trainable parameter of this model", pname) end
      for slot in pairs(slots) do
        if not (seen[pname] and seen[pname][slot]) then
          damaged("the %s state %q of %s is missing", optimizer.name, slot, pname)
        end
      end
    end
  end
  -- all the state's tensors, or (T.scope) none: those read before a failure are freed
  return require("trainer.core.tensor").scope(function()
    local tensors = {}
    for _, name in ipairs(names) do
      if name ~= "marker" then tensors[name] = reader:tensor(name, { tag = "optimizer", device = opts.device }) end
    end
    return tensors
  end)
end

-- The most bytes a valid state can decompress to: every optimizer keeps at most three f32
-- values per trainable parameter element (AdamW two, SGD one, Adafactor its first moment
-- and factored rows and columns), whatever optimizer the checkpoint was saved with.
local function size_limit(optimizer)
  local elements = 0
  if optimizer and optimizer.params then
    for _, e in ipairs(optimizer.params) do
      if e.param.trainable ~= false then elements = elements + e.param.value:numel() end
    end
  end
  return 3 * 4 * elements + M.HEADER_ALLOWANCE
end

-- ---------------------------------------------------------------- read
-- dir: a checkpoint folder; opts: optimizer (its state's shapes and size bound),
-- batches_per_epoch (bound of the data cursor), device (of the returned tensors),
-- scratch (the folder for the decompressed temporary file; default dir).
-- Returns meta (checked) and tensors { "optimizer.<param>.<slot>" = tensor }.
function M.read(dir, opts)
  opts = opts or {}
  local path = dir .. "/trainer_state"
  -- under mpirun every rank reads the state: each its own temporary file (opts.rank)
  local tmp = ("%s/.trainer_state.%d%s.tmp"):format(opts.scratch or dir, folder_step(dir) or 0,
    opts.rank and ("." .. opts.rank) or "")
  local st = require("trainer.core.safetensors")
  local reader
  local ok, a, b = pcall(function()
    local bytes = gunzip_bounded(path, size_limit(opts.optimizer))
    -- one checked native write (Lua's f:write + close can miss a failed flush under the JIT)
    local wok, _, werr = require("trainer.core.sys").write_file(tmp, bytes)
    if not wok then
      os.remove(tmp)
      errors.user("%s: cannot write the decompressed state (%s); is the disk full?", tmp, tostring(werr))
    end
    bytes = nil   -- luacheck: ignore 311 (lets the collector take the decompressed text now)
    local rok, r = pcall(st.load, tmp)
    if not rok then
      -- the reader's message names the temporary file: name the state instead
      local msg = errors.message(r):gsub("^" .. tmp:gsub("%p", "%%%0") .. ":%s*", "")
      damaged("%s", msg:gsub("%s*;.*$", ""))
    end
    reader = r
    local text = reader:metadata().trainer_state
    if text == nil then damaged("its header holds no trainer_state metadata") end
    local jok, meta = pcall(json.decode, text, "trainer_state")
    if not jok then damaged("its trainer_state metadata is not valid JSON") end
    if type(meta) ~= "table" then damaged("its trainer_state metadata is %s, not an object", show(meta)) end
    check_meta(meta, dir, opts)
    return meta, check_tensors(reader, meta, opts)
  end)
  if reader then reader:close() end
  os.remove(tmp)
  if not ok then
    if getmetatable(a) == Damage then errors.user("%s", M.damage_message(dir, a.what)) end
    error(a, 0)
  end
  return a, b
end

return M
