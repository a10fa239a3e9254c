-- trainer.train.optim: optimizers over the fused C steps. AdamW (torch.optim.AdamW), SGD with
-- momentum and Nesterov (torch.optim.SGD) and Adafactor (transformers' Adafactor).
--
--   local opt = optim.new(model:parameters(), recipe.optim)
--   opt:zero_grad()            -- zeroes (creating, tag "grads") the gradient of every trainable param
--                                 ({ free = true }: frees them; the backward makes each as it accumulates)
--   ... forward, backward (accumulates into param.grad) ...
--   opt:step({ lr = sched:lr(k), grad_scale = 1 })
--   opt:state() / opt:load_state(st)   -- exact resume;  opt:memory()  -- bytes by tag;  opt:free()
--   opt:transient_packs(acc)   -- a training loop's CPU weight packs: frozen ones, and (acc 1) trained ones,
--                                 live per product
--
-- Parameters: (name, param) pairs with param = { value = f32 tensor (the master weight),
-- grad = tensor or nil, trainable = bool (nil counts as true) }. Accepted as an iterator function, an
-- object with :parameters(), a list of records that carry .name, or a map name -> param.
-- Invariants: gradients and optimizer state exist only for trainable parameters; gradients
-- carry the tag "grads", state tensors (f32, created on a parameter's first step) the tag
-- "optimizer"; a parameter without a gradient is skipped (its step count does not move),
-- as torch skips p.grad = None. Weight decay follows transformers' Trainer groups: none
-- on biases and LayerNorm parameters (optim.decays(name)).
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")

local M = {}

local Optimizer = {}
Optimizer.__index = Optimizer

-- ---------------------------------------------------------------- parameters and groups

-- Whether weight decay applies to the parameter of this name: not to biases nor to
-- LayerNorm weights and biases (transformers' get_decay_parameter_names).
function M.decays(name)
  local lower = name:lower()
  if name:match("bias$") then return false end
  if lower:find("layernorm", 1, true) or lower:find("layer_norm", 1, true) then return false end
  return true
end

-- A list of { name, param } from any of the accepted shapes.
local function collect(params)
  local list = {}
  local function add(name, param)
    if type(param) ~= "table" or not T.is_tensor(param.value) then
      errors.user("optim.new: parameter %q has no tensor in .value; pass records { value = tensor, grad = tensor "
        .. "or nil, trainable = bool }", tostring(name))
    end
    list[#list + 1] = { name = name, param = param }
  end
  if type(params) == "function" then
    for name, param in params do add(name, param) end
  elseif type(params) == "table" and type(params.parameters) == "function" then
    for name, param in params:parameters() do add(name, param) end
  elseif type(params) == "table" and params[1] ~= nil then
    for i, param in ipairs(params) do add(param.name or ("param." .. i), param) end
  elseif type(params) == "table" then
    local names = {}
    for name in pairs(params) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do add(name, params[name]) end
  else
    errors.user("optim.new: parameters must be an iterator, a model with :parameters(), a list or a map, got %s",
      type(params))
  end
  local seen = {}
  for _, e in ipairs(list) do
    if seen[e.name] then errors.user("optim.new: parameter name %q appears twice", e.name) end
    seen[e.name] = true
    -- frozen parameters may be half (amp.prepare stores them so); they are never updated
    if e.param.trainable ~= false and e.param.value:dtype() ~= "f32" then
      errors.user("optim.new: parameter %q is %s; optimizers update f32 master weights (keep the trainable parameters in f32; trainer.amp does)",
        e.name, e.param.value:dtype())
    end
  end
  return list
end

local function trainable(param) return param.trainable ~= false end

-- ---------------------------------------------------------------- configuration

local kinds = {}   -- name -> { defaults(cfg) -> hp, slots(param, hp) -> { slot = shape }, update(...) }

local function bool(v, default)
  if v == nil then return default end
  return v and true or false
end

-- AdamW's defaults are the recipe keys' (trainer.recipe.keys: optim.lr, betas, eps,
-- weight_decay); SGD and Adafactor, given only some keys by a script, have their own
-- (PyTorch's and transformers'), which a recipe never reaches: its optim table has every key.
kinds.adamw = {
  config = function(cfg)
    cfg = require("trainer.recipe.keys").resolve("optim", cfg)
    return { lr = cfg.lr, beta1 = cfg.betas[1], beta2 = cfg.betas[2], eps = cfg.eps, weight_decay = cfg.weight_decay }
  end,
  slots = function(value) return { m = value:shape(), v = value:shape() } end,
  update = function(hp, e, st, lr, wd, scale)
    ops.adamw_(e.param.value, e.param.grad, st.m, st.v, { lr = lr, beta1 = hp.beta1,
      beta2 = hp.beta2, eps = hp.eps, weight_decay = wd, step = st.step, grad_scale = scale })
  end,
  -- Every parameter of the step through adamw_multi: one call (one launch on a GPU) per step
  -- count (parameters normally share one), skipped on the device when skip_if is set. On the
  -- CPU the bits of update() per parameter (test_ops_table's adamw_multi case).
  update_all = function(hp, stepped, lr, scale, skip_if, skipped, skipped_known)
    local groups, order = {}, {}
    for _, x in ipairs(stepped) do
      local g = groups[x.st.step]
      if not g then
        g = { params = {}, grads = {}, m = {}, v = {}, decay = {} }
        groups[x.st.step] = g
        order[#order + 1] = x.st.step
      end
      local i = #g.params + 1
      g.params[i], g.grads[i], g.m[i], g.v[i], g.decay[i] = x.e.param.value, x.e.param.grad, x.st.m, x.st.v, x.e.decay
    end
    for _, step in ipairs(order) do
      local g = groups[step]
      ops.adamw_multi_(g.params, g.grads, g.m, g.v, g.decay, skip_if, { lr = lr, beta1 = hp.beta1, beta2 = hp.beta2,
        eps = hp.eps, weight_decay = hp.weight_decay, step = step, grad_scale = scale, skipped = skipped,
        skipped_known = skipped_known })
    end
  end,
}

kinds.sgd = {
  config = function(cfg)
    return { lr = cfg.lr or 1e-3, momentum = cfg.momentum or 0, dampening = cfg.dampening or 0,
             nesterov = bool(cfg.nesterov, false), weight_decay = cfg.weight_decay or 0 }
  end,
  slots = function(value, hp)
    if hp.momentum == 0 then return {} end
    return { momentum_buffer = value:shape() }
  end,
  -- skip_if, skipped, skipped_known: read by the op where they live (a device skips there)
  update = function(hp, e, st, lr, wd, scale, skip_if, skipped, skipped_known)
    ops.sgd_(e.param.value, e.param.grad, st.momentum_buffer, { lr = lr, momentum = hp.momentum,
      dampening = hp.dampening, weight_decay = wd, nesterov = hp.nesterov, step = st.step, grad_scale = scale,
      skip_if = skip_if, skipped = skipped, skipped_known = skipped_known })
  end,
  skips_on_device = true,
}

-- Adafactor: with no lr (or relative_step = true) transformers' defaults (relative step,
-- parameter scale); with an lr, the configuration transformers' Trainer builds
-- (relative_step = scale_parameter = false). Each key can be set explicitly.
kinds.adafactor = {
  config = function(cfg)
    local relative = bool(cfg.relative_step, cfg.lr == nil)
    local c = ffi.new("tr_adafactor_config")
    c.lr = relative and 0 or (cfg.lr or 0)
    c.eps1 = cfg.eps1 or 1e-30
    c.eps2 = cfg.eps2 or 1e-3
    c.clip_threshold = cfg.clip_threshold or 1.0
    c.decay_rate = cfg.decay_rate or -0.8
    c.beta1 = cfg.beta1 or -1
    c.relative_step = relative and 1 or 0
    c.scale_parameter = bool(cfg.scale_parameter, relative) and 1 or 0
    c.warmup_init = bool(cfg.warmup_init, false) and 1 or 0
    if not relative and not (cfg.lr and cfg.lr > 0) then
      errors.user("optim: adafactor with relative_step = false needs lr > 0")
    end
    if c.warmup_init ~= 0 and not relative then errors.user("optim: adafactor warmup_init needs relative_step") end
    return { lr = not relative and cfg.lr or nil, relative = relative, c = c, weight_decay = cfg.weight_decay or 0,
             warmup_init = c.warmup_init ~= 0 }
  end,
  slots = function(value, hp)
    local s = value:shape()
    local slots = {}
    if hp.c.beta1 >= 0 then slots.exp_avg = s end
    if #s >= 2 then
      local row, col = {}, {}
      for i = 1, #s - 1 do row[i] = s[i] end
      for i = 1, #s - 2 do col[i] = s[i] end
      col[#col + 1] = s[#s]
      slots.exp_avg_sq_row, slots.exp_avg_sq_col = row, col
    else
      slots.exp_avg_sq = s
    end
    return slots
  end,
  update = function(hp, e, st, lr, wd, scale, skip_if, skipped, skipped_known)
    local c = hp.c
    if not hp.relative then c.lr = lr end
    c.weight_decay = wd
    -- no lr_used: on a device reading it back would wait for the step (Optimizer:step
    -- returns the relative step size, computed here)
    ops.adafactor_(e.param.value, e.param.grad, { exp_avg = st.exp_avg, row = st.exp_avg_sq_row,
      col = st.exp_avg_sq_col, v = st.exp_avg_sq }, c, { step = st.step, grad_scale = scale, skip_if = skip_if,
      skipped = skipped, skipped_known = skipped_known })
  end,
  skips_on_device = true,
}

M.names = { "adamw", "sgd", "adafactor" }

-- ---------------------------------------------------------------- construction

-- params: see the header; cfg: the recipe's optim table (name, lr, weight_decay, betas,
-- eps, momentum, nesterov, dampening; for adafactor also beta1, eps1, eps2,
-- clip_threshold, decay_rate, relative_step, scale_parameter, warmup_init).
function M.new(params, cfg)
  cfg = cfg or {}
  local name = require("trainer.recipe.keys").value("optim.name", cfg.name)
  local kind = kinds[name]
  local hp = kind.config(cfg)
  local self = setmetatable({ name = name, kind = kind, hp = hp, params = collect(params), state_ = {}, steps = 0 },
    Optimizer)
  self.by_name = {}
  for _, e in ipairs(self.params) do
    self.by_name[e.name] = e
    e.decay = M.decays(e.name)
  end
  return self
end

-- Parameter groups as transformers' Trainer forms them: { { weight_decay, names }, ... }.
function Optimizer:groups()
  local decay, none = { weight_decay = self.hp.weight_decay, names = {} }, { weight_decay = 0, names = {} }
  for _, e in ipairs(self.params) do
    if trainable(e.param) then
      local g = e.decay and decay or none
      g.names[#g.names + 1] = e.name
    end
  end
  return { decay, none }
end

-- ---------------------------------------------------------------- gradients

local function zero_grad_of(prm)
  return T.keep(T.zeros(prm.value:shape(), { dtype = "f32", device = prm.value:device(), tag = "grads" }))
end

-- Zeroes every trainable parameter's gradient, creating missing ones (f32, the value's
-- shape and device, tag "grads"). Frozen parameters get none.
-- opts.free: frees every gradient instead; the backward makes each anew (zeros, then its
-- sum: Module.grad_of) as it first accumulates into it, so no gradient is held through the
-- forward, where the activations peak (torch's zero_grad(set_to_none=True)). The next step
-- still updates a trainable parameter the backward left without one, with a zero gradient,
-- as after a plain zero_grad.
function Optimizer:zero_grad(opts)
  local free = opts and opts.free
  self.grads_freed = free or nil
  for _, e in ipairs(self.params) do
    local prm = e.param
    if trainable(prm) then
      if free then
        if prm.grad then prm.grad:free() end
        prm.grad = nil
      elseif prm.grad then
        prm.grad:fill(0)
      else
        prm.grad = zero_grad_of(prm)
      end
    end
  end
end

-- oneDNN packs (the CPU Linear's copies of an f32 weight in the products' layout) made for one
-- product and freed as it returns (ops.transient_packs), as a training loop wants them:
--   - every frozen parameter's: kept, a frozen weight's two packs would be two more copies of
--     it beside the activations at their peak, what LoRA is chosen to save (ModernBERT at
--     BERT-base's shape: 904 MB of packs beside 611 MB of weights); repacking costs a pass over
--     the weight per product (docs/BENCHMARKS.md: 0-1.5 % of a LoRA step);
--   - every trainable parameter's when a step runs one forward and one backward (accumulate
--     1, the default): the step writes the weight, so a pack could never serve a second
--     product. Micro-batches (accumulate > 1) share a trained weight's packs instead.
function Optimizer:transient_packs(accumulate)
  local trained = (accumulate or 1) == 1
  for _, e in ipairs(self.params) do
    if trained or not trainable(e.param) then ops.transient_packs(e.param.value, true) end
  end
end

local function new_state(self, e)
  local st = { step = 0 }
  for slot, shape in pairs(self.kind.slots(e.param.value, self.hp)) do
    st[slot] = T.keep(T.zeros(shape, { dtype = "f32", device = e.param.value:device(), tag = "optimizer" }))
  end
  return st
end

-- Makes every trainable parameter's optimizer state now (zeros, as its first step would),
-- before the first forward: made at the first step instead, it would land in the blocks the
-- activations had just freed and split them, and the next forward would take new memory
-- where its activations no longer fit (60 MB more reserved for a full fine-tune of ModernBERT
-- at BERT-base). A training loop steps every trainable parameter at every step (zero_grad
-- gives each a gradient; with free, step() gives a zero one to a parameter left without),
-- so the state made here is the state its first step would make.
function Optimizer:make_state()
  for _, e in ipairs(self.params) do
    if trainable(e.param) and not self.state_[e.name] then self.state_[e.name] = new_state(self, e) end
  end
end

-- ---------------------------------------------------------------- step

-- One update of every trainable parameter that has a gradient. opts.lr: this step's
-- learning rate (default the configured lr; ignored by Adafactor's relative step);
-- opts.grad_scale: the loss scale the gradients still carry (default 1); opts.skip_if: a
-- found-inf flag tensor ({ 1 } i32): every optimizer skips where the flag lives when it is
-- set (nothing read here on a device; the caller that learns of the skip later calls
-- undo_step), but AdamW over a non-f32 gradient (the per-parameter op), which reads it
-- first (one wait on a device). opts.skipped, opts.skipped_known: the device loss scale's
-- skip count and the part of it the step counts already account for (the step each update
-- uses, SGD's first step and Adafactor's relative step and beta2 included, is its count
-- less the rest; the caller undoes those steps later, undo_steps). Returns the lr applied
-- (Adafactor's relative step: the relative step size, before the RMS scale, from the host's
-- count, which still holds the skips it has not read) and true when the step was skipped
-- on a flag read here.
function Optimizer:step(opts)
  opts = opts or {}
  local hp = self.hp
  local lr = opts.lr or hp.lr
  local scale = opts.grad_scale or 1
  if not hp.relative and (type(lr) ~= "number" or lr < 0) then
    errors.user("optimizer:step: lr must be a number >= 0, got %s", tostring(lr))
  end
  if type(scale) ~= "number" or not (scale > 0) then
    errors.user("optimizer:step: grad_scale must be a number > 0, got %s", tostring(scale))
  end
  -- adamw_multi reads f32 gradients; another dtype goes through the per-parameter AdamW op,
  -- which cannot skip on the device: then the flag is read here. SGD's and Adafactor's ops
  -- take the flag (skips_on_device).
  local all = self.kind.update_all
  for _, e in ipairs(self.params) do
    if all and trainable(e.param) and e.param.grad and e.param.grad:dtype() ~= "f32" then all = nil end
  end
  local device_skip = all or self.kind.skips_on_device
  if opts.skip_if and not device_skip and opts.skip_if:item() ~= 0 then return lr, true end
  if self.grads_freed then   -- zero_grad({ free = true }): a gradient the backward never made is 0
    for _, e in ipairs(self.params) do
      if trainable(e.param) and not e.param.grad then e.param.grad = zero_grad_of(e.param) end
    end
  end
  self.steps = self.steps + 1
  local max_step, stepped = 0, {}
  for _, e in ipairs(self.params) do
    if trainable(e.param) and e.param.grad then
      local st = self.state_[e.name]
      if not st then
        st = new_state(self, e)
        self.state_[e.name] = st
      end
      st.step = st.step + 1
      if st.step > max_step then max_step = st.step end
      stepped[#stepped + 1] = { e = e, st = st }
    end
  end
  self.last_stepped = stepped
  if all then
    all(hp, stepped, lr, scale, opts.skip_if, opts.skipped, opts.skipped_known)
  else
    local skip_if = device_skip and opts.skip_if or nil
    for _, x in ipairs(stepped) do
      self.kind.update(hp, x.e, x.st, lr, x.e.decay and hp.weight_decay or 0, scale, skip_if, opts.skipped,
        opts.skipped_known)
    end
  end
  if hp.relative then
    local t = math.max(max_step, 1)
    lr = math.min(hp.warmup_init and 1e-6 * t or 1e-2, 1 / math.sqrt(t))
  end
  return lr
end

-- The last step was skipped on the device (its found-inf flag, read after it): its step
-- counts go back, as if step() had not been called (state made by it stays, still zero).
function Optimizer:undo_step()
  if not self.last_stepped then return end
  self.steps = self.steps - 1
  for _, x in ipairs(self.last_stepped) do x.st.step = x.st.step - 1 end
  self.last_stepped = nil
end

-- n steps skipped on the device since the step counts were last right (the device loss
-- scale's skip count, read at a logged step): every parameter's count and the optimizer's go
-- back by n. Every stepped parameter is taken to have stepped at each of those steps (a
-- parameter that got no gradient at one of them would be off by one).
function Optimizer:undo_steps(n)
  if not n or n <= 0 then return end
  self.steps = self.steps - n
  for _, st in pairs(self.state_) do st.step = math.max(st.step - n, 0) end
end

-- ---------------------------------------------------------------- state

-- The optimizer's state for a checkpoint: { name, steps, params = { [param name] =
-- { step = n, <slot> = tensor, ... } } }. The tensors are the live state (not copies):
-- write them out before the next step, and never free them.
function Optimizer:state()
  local params = {}
  for name, st in pairs(self.state_) do
    local copy = {}
    for k, v in pairs(st) do copy[k] = v end
    params[name] = copy
  end
  return { name = self.name, steps = self.steps, params = params }
end

-- The state tensors' shapes { slot = shape } that parameter NAME keeps, or nil when it is
-- not a trainable parameter of this optimizer (checks a checkpoint before load_state).
function Optimizer:slot_shapes(name)
  local e = self.by_name[name]
  if not e or not trainable(e.param) then return nil end
  return self.kind.slots(e.param.value, self.hp)
end

-- Restores a state() table (its tensors are copied, never kept): continuing from it is
-- bit-identical to never having stopped. Parameters absent from st start fresh.
function Optimizer:load_state(st)
  if type(st) ~= "table" or type(st.params) ~= "table" then
    errors.user("optimizer:load_state: expected the table optimizer:state() returns ({ name, steps, params })")
  end
  if st.name and st.name ~= self.name then
    errors.user("optimizer:load_state: the state is of optimizer %q but this optimizer is %q; resume with the same "
      .. "optim.name", tostring(st.name), self.name)
  end
  -- validate everything first: a refused state leaves the optimizer as it was
  for name, saved in pairs(st.params) do
    local e = self.by_name[name]
    if not e then errors.user("optimizer:load_state: the state holds parameter %q, which this model does not have", name) end
    if not trainable(e.param) then
      errors.user("optimizer:load_state: the state holds parameter %q, which is frozen here", name)
    end
    if type(saved) ~= "table" or type(saved.step) ~= "number" or saved.step < 0 then
      errors.user("optimizer:load_state: parameter %q has no step count", name)
    end
    for slot, shape in pairs(self.kind.slots(e.param.value, self.hp)) do
      local n = 1
      for _, d in ipairs(shape) do n = n * d end
      local src = saved[slot]
      if not T.is_tensor(src) or src:numel() ~= n then
        errors.user("optimizer:load_state: parameter %q: state %q is missing or has %s elements where %d are "
          .. "needed (was the state saved with other optimizer settings?)", name, slot,
          T.is_tensor(src) and tostring(src:numel()) or "no", n)
      end
    end
  end
  self:free()
  for name, saved in pairs(st.params) do
    local own = new_state(self, self.by_name[name])
    own.step = saved.step
    for slot, t in pairs(own) do
      if slot ~= "step" then
        runtime.check(C.tr_tensor_copy(runtime.ctx, t:ptr(), saved[slot]:ptr()), "optimizer:load_state")
      end
    end
    self.state_[name] = own
  end
  self.steps = st.steps or 0
end

-- A state() table as flat tensors and plain data, for a checkpoint: tensors maps
-- "optimizer.<param name>.<slot>" to the live state tensor (safetensors keys), meta is
-- { name, steps, step = { [param name] = n } } (JSON). M.unflatten inverts it.
function M.flatten(st)
  local tensors, meta = {}, { name = st.name, steps = st.steps, step = {} }
  for pname, s in pairs(st.params) do
    meta.step[pname] = s.step
    for slot, t in pairs(s) do
      if slot ~= "step" then tensors["optimizer." .. pname .. "." .. slot] = t end
    end
  end
  return tensors, meta
end

function M.unflatten(tensors, meta)
  local st = { name = meta.name, steps = meta.steps, params = {} }
  for pname, n in pairs(meta.step or {}) do st.params[pname] = { step = n } end
  for key, t in pairs(tensors) do
    local pname, slot = key:match("^optimizer%.(.+)%.([%w_]+)$")
    if not pname or not st.params[pname] then
      errors.user("optimizer state: tensor %q names no parameter of the saved state (expected "
        .. "optimizer.<param>.<slot> with the parameter listed in the metadata)", key)
    end
    st.params[pname][slot] = t
  end
  return st
end

-- Frees every state tensor (the optimizer starts fresh at its next step).
function Optimizer:free()
  for _, st in pairs(self.state_) do
    for _, t in pairs(st) do if T.is_tensor(t) then t:free() end end
  end
  self.state_ = {}
end

-- Bytes held, by tag: weights (master values of all params), grads (gradients of
-- trainable params), optimizer (state tensors).
function Optimizer:memory()
  local m = { weights = 0, grads = 0, optimizer = 0 }
  for _, e in ipairs(self.params) do
    m.weights = m.weights + e.param.value:nbytes()
    if trainable(e.param) and e.param.grad then m.grads = m.grads + e.param.grad:nbytes() end
  end
  for _, st in pairs(self.state_) do
    for _, t in pairs(st) do if T.is_tensor(t) then m.optimizer = m.optimizer + t:nbytes() end end
  end
  return m
end

return M
