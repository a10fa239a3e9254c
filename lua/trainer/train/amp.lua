-- trainer.train.amp: mixed precision (the recipe's `precision`) and the fp16 loss scaler.
--
--   local amp = require("trainer.train.amp")
--   local info = amp.prepare(model, "bf16")       -- after lora.apply, before optim.new
--   local scaler = amp.new_scaler("fp16")          -- scaler.scale multiplies the loss gradient
--   ... k micro-batches: backward of (loss gradient x scaler.scale / k) ...
--   if not scaler:unscale(model) then clip(...); opt:step(...) end   -- inf/NaN: skip
--   scaler:update(found_inf)
--
-- precision = "fp32" | "bf16" | "fp16". In bf16/fp16:
--   * activations are stored in the half type: the embedding lookups produce it and every
--     module after them keeps its input's dtype (layernorm, softmax and losses reduce in
--     f32 inside the ops; the CPU GEMM stages half operands to f32 with f32 accumulation);
--   * frozen parameters are converted to half ONCE and their f32 copy is freed (tag
--     "weights"): they never get a gradient, so nothing needs their f32 value;
--   * trainable parameters keep their f32 master in .value (the optimizer updates it and
--     the forward reads it directly: on the CPU a half copy would be converted back to
--     f32 by the op, costing memory for nothing; on a GPU the products read a bf16 copy
--     that core/cuda_ops/weight_half.c keeps beside the master and remakes after each
--     update). Gradients are f32 (tag "grads").
-- fp16 adds a dynamic loss scaler with torch.cuda.amp.GradScaler's semantics: init 2^16,
-- x0.5 and the optimizer step skipped when an unscaled gradient holds an inf or NaN, x2
-- after growth_interval (2000) consecutive clean steps; unscale once per optimizer step,
-- after accumulation and before clipping. fp32 and bf16 get a disabled scaler (scale 1,
-- unscale and update do nothing), so a loop is written once for all three: it asks the
-- scaler (scaler.enabled: whether it scales, so that an inf or NaN is a skipped step rather
-- than a failure), never the precision.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

local M = {}

local activation = { fp32 = "f32", bf16 = "bf16", fp16 = "f16" }
M.precisions = { "fp32", "bf16", "fp16" }

-- ---------------------------------------------------------------- precision

-- The recipe key's value (trainer.recipe.keys: its allowed values and its default, fp32).
local function check(precision, where)
  return require("trainer.recipe.keys").value("precision", precision, where)
end
M.check = check

-- The dtype activations are stored in: "f32" | "bf16" | "f16".
function M.activation_dtype(precision)
  return activation[check(precision, "amp.activation_dtype")]
end

-- The dtype frozen weights are stored in (nil for fp32: they stay f32).
function M.half_dtype(precision)
  local d = activation[check(precision, "amp.half_dtype")]
  if d == "f32" then return nil end
  return d
end

-- ---------------------------------------------------------------- prepare

local function convert(p, dtype)
  local v = p.value
  if v:dtype() == dtype then return 0 end
  local t = v:to({ dtype = dtype, device = v:device(), tag = "weights" })
  local saved = v:nbytes() - t:nbytes()
  v:free()
  p.value = T.keep(t)
  return saved
end

-- Puts model (a trainer.nn module) in the given precision, in place. Frozen parameters
-- (trainable == false) go to the half type once; trainable ones are (or become) f32
-- masters; every Embedding module emits the activation dtype. Call it after freezing
-- (lora.apply) and before building the optimizer. Calling it again with fp32 turns
-- activations back to f32 and trainable weights to f32, but frozen weights already in
-- half stay half (their f32 bits are gone).
-- Returns { precision, activation_dtype, frozen_half = count converted, trainable = count,
-- weights_bytes_saved }.
function M.prepare(model, precision)
  precision = check(precision, "amp.prepare")
  if type(model) ~= "table" or type(model.parameters) ~= "function" or type(model.named_modules) ~= "function" then
    errors.user("amp.prepare: the model must be a trainer.nn module (with :parameters() and :named_modules())")
  end
  local act, half = activation[precision], M.half_dtype(precision)
  local info = { precision = precision, activation_dtype = act, frozen_half = 0, trainable = 0,
                 weights_bytes_saved = 0 }
  for _, p in model:parameters() do
    if p.trainable == false then
      if half then
        local saved = convert(p, half)
        if saved ~= 0 then
          info.frozen_half = info.frozen_half + 1
          info.weights_bytes_saved = info.weights_bytes_saved + saved
        end
      end
    else
      info.trainable = info.trainable + 1
      info.weights_bytes_saved = info.weights_bytes_saved + convert(p, "f32")
    end
  end
  for _, m in model:named_modules() do
    if m.__name == "Embedding" then m.activation_dtype = act end
  end
  model.precision, model.activation_dtype = precision, act
  return info
end

-- ---------------------------------------------------------------- the loss scaler

local Scaler = {}
Scaler.__index = Scaler

local function grad_list(params)
  local list = {}
  local function add(p)
    if type(p) == "table" and p.trainable ~= false and p.grad then list[#list + 1] = p.grad end
  end
  if type(params) == "function" then
    for _, p in params do add(p) end
  elseif type(params) == "table" and type(params.parameters) == "function" then
    for _, p in params:parameters() do add(p) end
  elseif type(params) == "table" then
    for k, p in pairs(params) do
      if T.is_tensor(p) then list[#list + 1] = p
      elseif type(k) == "number" and type(p) == "table" and p.param then add(p.param)
      else add(p) end
    end
  else
    errors.user("scaler:unscale: params must be a model, an iterator or a list of parameter records, got %s",
      type(params))
  end
  return list
end
M.grad_list = grad_list

-- precision: "fp32" | "bf16" | "fp16" (only fp16 scales). state: a previous
-- scaler:state() to resume from (nil: fresh). opts (tests and tuning): init_scale (2^16),
-- growth_factor (2), backoff_factor (0.5), growth_interval (2000).
function M.new_scaler(precision, state, opts)
  precision = check(precision, "amp.new_scaler")
  opts = opts or {}
  local self = setmetatable({
    enabled = precision == "fp16",
    init_scale = opts.init_scale or 65536,
    growth_factor = opts.growth_factor or 2,
    backoff_factor = opts.backoff_factor or 0.5,
    growth_interval = opts.growth_interval or 2000,
    growth_tracker = 0,   -- consecutive clean steps since the last change
    skipped = 0,          -- optimizer steps skipped for inf/NaN, over the whole run
    unscaled = false,     -- whether unscale ran since the last update
  }, Scaler)
  for _, k in ipairs({ "init_scale", "growth_factor", "backoff_factor", "growth_interval" }) do
    if type(self[k]) ~= "number" or not (self[k] > 0) then
      errors.user("amp.new_scaler: %s must be a number > 0, got %s", k, tostring(self[k]))
    end
  end
  self.scale = self.enabled and self.init_scale or 1
  if state ~= nil then self:load_state(state) end
  return self
end

-- The trainable gradients to unscale in this optimizer step; marks the step unscaled (a
-- second call before update() is a user error: it would divide twice).
local function begin_unscale(self, params)
  if self.unscaled then
    errors.user("scaler:unscale called twice in one optimizer step; call it once, after the last micro-batch "
      .. "and before clipping, then scaler:update")
  end
  local list = grad_list(params)
  self.unscaled = true
  return list
end

-- Divides every trainable gradient by the scale (once per optimizer step: a second call
-- before update() is a user error, it would divide twice) and reports whether any holds
-- an inf or NaN. The caller skips the optimizer step when it returns true. Disabled
-- scaler: returns false and touches nothing.
function Scaler:unscale(params)
  if not self.enabled then return false end
  local list = begin_unscale(self, params)
  self.found_inf = #list > 0 and ops.scale_check_finite(list, 1 / self.scale) or false
  return self.found_inf
end

-- unscale without a host read (a device run): the gradients are divided by the
-- scale and found_inf (a { 1 } i32 tensor the caller zeroed for this step) is set on the
-- device when one holds an inf or NaN; the optimizer (AdamW, SGD, Adafactor) skips on it there. The caller
-- reads the flag when it needs the decision (update takes it). Disabled scaler: nothing.
function Scaler:unscale_into(params, found_inf)
  if not self.enabled then return end
  local list = begin_unscale(self, params)
  self.found_inf = nil
  if #list == 0 then return end
  if self.dev then ops.scale_check_finite_by_into(list, self.dev.inv, found_inf)
  else ops.scale_check_finite_into(list, 1 / self.scale, found_inf) end
end

-- ---------------------------------------------------------------- the scale on the device
-- A device run keeps the scale, 1/scale, the growth tracker and the skip count in
-- { 1 } tensors on the device (tag workspace): update_into applies update()'s rule there from
-- the step's found-inf flag (loss_scale_update), the backward's seed is multiplied by
-- dev.scale there (ops.scale_by_scalar_) and the unscale divides by dev.inv, so no step reads
-- the flag. read() brings the numbers back (the logged steps, a checkpoint, the summary);
-- between reads self.scale, growth_tracker and skipped are those of the last read. In f32,
-- as torch's GradScaler: with the default factors (powers of two) every value is the
-- double update() computes, bit for bit. skipped_known: the skip count the optimizer's step
-- counts already account for (trainer.train.optim: the optimizer's ops take the rest from dev.skipped).
function Scaler:to_device(device)
  if not self.enabled or self.dev then return end
  local function scalar(dtype, v)
    local t = T.keep(T.zeros({ 1 }, { dtype = dtype, device = device, tag = "workspace" }))
    if v ~= 0 then t:fill(v) end
    return t
  end
  self.dev = { scale = scalar("f32", self.scale), inv = scalar("f32", 1 / self.scale),
               tracker = scalar("i32", self.growth_tracker), skipped = scalar("i32", self.skipped) }
  self.skipped_known = self.skipped
  self.stale = false
end

-- Ends an optimizer step on the device (update()'s rule, nothing read).
function Scaler:update_into(found_inf)
  self.unscaled, self.found_inf = false, nil
  if not self.dev then return end
  ops.loss_scale_update_(self.dev, found_inf, { growth_factor = self.growth_factor,
    backoff_factor = self.backoff_factor, growth_interval = self.growth_interval })
  self.stale = true
end

-- Reads the device state into scale, growth_tracker and skipped (the one wait; nothing when
-- nothing changed since the last read). Returns the skips the optimizer has not accounted
-- for (skipped - skipped_known); the caller undoes that many optimizer steps and then sets
-- skipped_known = skipped.
function Scaler:read()
  if not self.dev then return 0 end
  if self.stale then
    self.scale = self.dev.scale:item()
    self.growth_tracker = self.dev.tracker:item()
    self.skipped = self.dev.skipped:item()
    self.stale = false
  end
  return self.skipped - self.skipped_known
end

function Scaler:free()
  if not self.dev then return end
  for _, t in pairs(self.dev) do t:free() end
  self.dev = nil
end

-- Ends an optimizer step: on found_inf (default: what unscale found) the scale backs off
-- and the step counts as skipped; otherwise after growth_interval clean steps in a row it
-- grows. Returns the new scale.
function Scaler:update(found_inf)
  if found_inf == nil then found_inf = self.found_inf end
  self.unscaled, self.found_inf = false, nil
  if not self.enabled then return self.scale end
  if found_inf then
    self.scale = self.scale * self.backoff_factor
    self.growth_tracker = 0
    self.skipped = self.skipped + 1
  else
    self.growth_tracker = self.growth_tracker + 1
    if self.growth_tracker >= self.growth_interval then
      self.scale = self.scale * self.growth_factor
      self.growth_tracker = 0
    end
  end
  return self.scale
end

-- Plain numbers (JSON-able) for a checkpoint's trainer_state (a device scaler: as of the
-- last read(); the run reads it before it saves).
function Scaler:state()
  return { enabled = self.enabled, scale = self.scale, growth_tracker = self.growth_tracker, skipped = self.skipped,
           growth_interval = self.growth_interval }
end

function Scaler:load_state(st)
  if type(st) ~= "table" or type(st.scale) ~= "number" or not (st.scale > 0) then
    errors.user("scaler state: expected the table scaler:state() returns ({ scale = number > 0, growth_tracker, "
      .. "skipped })")
  end
  if self.enabled then self.scale = st.scale end
  self.growth_tracker = st.growth_tracker or 0
  self.skipped = st.skipped or 0
  self.unscaled, self.found_inf = false, nil
  if self.dev then
    self.dev.scale:fill(self.scale); self.dev.inv:fill(1 / self.scale)
    self.dev.tracker:fill(self.growth_tracker); self.dev.skipped:fill(self.skipped)
    self.skipped_known, self.stale = self.skipped, false
  end
end

return M
