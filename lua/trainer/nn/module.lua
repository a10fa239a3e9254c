-- trainer.nn.module: the base of every nn module, in the spirit of Torch7's nn.
--
--   y  = m:forward(x [, extra])   -- y is a NEW tensor owned by the caller (free it)
--   dx = m:backward(dy)           -- dx NEW, owned by the caller (nil for integer inputs);
--                                    parameter gradients ACCUMULATE (+=) into param.grad
--
-- Ownership invariants (what makes memory deterministic):
--   * a module never frees what it was given: whatever it needs for the backward it keeps
--     as its own VIEW (m:keep), so the caller may free its tensors right after forward;
--   * everything kept lives in m.saved (a flat table name -> tensor, explicit so that a
--     Checkpoint container can drop it with clear_saved() and rebuild it by re-running
--     forward); backward releases it at its end; with grad disabled (eval(), or
--     set_grad_enabled(false)) forward keeps nothing at all;
--   * parameters are { value = tensor, grad = tensor or nil, trainable = bool }; a grad
--     buffer (f32, tag "grads") exists only for trainable parameters and is allocated on
--     the first backward that reaches it; frozen parameters never get one;
--   * parameters, grad buffers and saved tensors are marked T.keep: a T.scope around a
--     forward or a training step never frees them (the module does).
--
-- Modes: train() (dropout on, grad on), eval() (dropout off, grad off);
-- set_grad_enabled(b) switches the keeping of activations alone, so eval():set_grad_enabled(true)
-- is PyTorch's model.eval() with autograd (the golden tests' setting).
-- Names: parameters() and named_modules() give dotted names built from the names children
-- were added under; a child added under "" is transparent (its names are its parent's),
-- so module nesting need not mirror the Hugging Face state-dict names to produce them.
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")

local Module = {}
Module.__index = Module
Module.__name = "Module"
-- print(model) and the REPL show a summary (class, parameter counts, submodules), the way
-- PyTorch prints a module, not the tables inside.
Module.__tostring = function(self) return require("trainer.cli.pretty").module(self) end

-- A subclass: local Linear = Module:extend("Linear"); Linear.new = function(...) local self = Linear:create() ... end
function Module:extend(name)
  local cls = setmetatable({}, { __index = self })
  cls.__index = cls
  cls.__name = name
  cls.__tostring = self.__tostring   -- metamethods are not inherited through __index
  cls.super = self
  return cls
end

-- A bare instance of a class (constructors call this first).
function Module:create()
  return setmetatable({ _params = {}, _children = {}, saved = {}, training = true, grad_enabled = true }, self)
end

function Module:type() return self.__name end

-- ---------------------------------------------------------------- structure
-- Registers a parameter; also reachable as self[name] (the param table).
function Module:add_param(name, value, trainable)
  local p = { value = T.keep(value), grad = nil, trainable = trainable ~= false }
  self._params[#self._params + 1] = { name, p }
  self[name] = p
  return p
end

-- Registers a child under name ("" = transparent); also reachable as self[field or name].
function Module:add_module(name, child, field)
  if field ~= false then field = field or name end
  if field == "" then field = false end
  self._children[#self._children + 1] = { name, child, field }
  if field then self[field] = child end
  return child
end

-- Replaces the child registered under name (LoRA wraps a Linear this way).
function Module:replace_module(name, child)
  for _, entry in ipairs(self._children) do
    if entry[1] == name then
      entry[2] = child
      if entry[3] then self[entry[3]] = child end
      return child
    end
  end
  errors.user("%s has no child module %q", self.__name, tostring(name))
end

local function join(prefix, name)
  if name == "" then return prefix end
  if prefix == "" then return name end
  return prefix .. "." .. name
end

-- An iterator over list giving fields(entry) for each entry in order.
local function each(list, fields)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return fields(e) end
  end
end

-- List of { name, param } in a deterministic order: own parameters in registration order,
-- then each child's, recursively (PyTorch's named_parameters order).
function Module:parameter_list(prefix, out)
  out = out or {}
  prefix = prefix or ""
  for _, entry in ipairs(self._params) do out[#out + 1] = { join(prefix, entry[1]), entry[2] } end
  for _, entry in ipairs(self._children) do entry[2]:parameter_list(join(prefix, entry[1]), out) end
  return out
end

-- for name, param, grad in m:parameters() do ... end (grad = param.grad, nil until a
-- backward reached a trainable parameter)
function Module:parameters()
  return each(self:parameter_list(), function(e) return e[1], e[2], e[2].grad end)
end

-- name -> param
function Module:parameter_map()
  local map = {}
  for name, p in self:parameters() do map[name] = p end
  return map
end

-- List of { name, module, parent, child_name } depth first, self first (name "").
-- Transparent children appear under their parent's name.
function Module:module_list(prefix, out, parent, child_name)
  out = out or {}
  prefix = prefix or ""
  out[#out + 1] = { prefix, self, parent, child_name }
  for _, entry in ipairs(self._children) do
    entry[2]:module_list(join(prefix, entry[1]), out, self, entry[1])
  end
  return out
end

-- for name, module, parent, child_name in m:named_modules() do ... end
function Module:named_modules()
  return each(self:module_list(), function(e) return e[1], e[2], e[3], e[4] end)
end

function Module:children()
  local out = {}
  for _, entry in ipairs(self._children) do out[#out + 1] = entry[2] end
  return out
end

-- ---------------------------------------------------------------- modes
local function each_module(self, fn)
  fn(self)
  for _, entry in ipairs(self._children) do each_module(entry[2], fn) end
end
Module.each_module = each_module

function Module:train()
  each_module(self, function(m) m.training = true; m.grad_enabled = true end)
  return self
end

function Module:eval()
  each_module(self, function(m) m.training = false; m.grad_enabled = false end)
  return self
end

function Module:set_grad_enabled(on)
  each_module(self, function(m) m.grad_enabled = on and true or false end)
  return self
end

-- Marks every parameter trainable (true) or frozen (false); a frozen parameter's grad
-- buffer, if any, is freed.
function Module:set_trainable(on)
  for _, p in self:parameters() do
    p.trainable = on and true or false
    if not p.trainable and p.grad then p.grad:free(); p.grad = nil end
  end
  return self
end

-- ---------------------------------------------------------------- gradients
-- The grad buffer of a trainable parameter (allocated as zeros on first use), or nil.
function Module.grad_of(p)
  if not p.trainable then return nil end
  if not p.grad then
    p.grad = T.keep(T.zeros(p.value:shape(), { dtype = "f32", device = p.value:device(), tag = "grads" }))
  end
  return p.grad
end

-- True when a parameter of this module or a descendant trains: a backward that owes no input
-- gradient can skip a module without one (an attention block's frozen key under LoRA).
function Module:any_trainable()
  for _, p in self:parameters() do
    if p.trainable then return true end
  end
  return false
end

function Module:zero_grad()
  for _, p in self:parameters() do if p.grad then p.grad:fill(0) end end
  return self
end

-- ---------------------------------------------------------------- saved state
-- Keeps a view of t under name for the backward (nothing when grad is disabled).
-- Returns t, so calls chain.
function Module:keep(name, t)
  if self.grad_enabled and t ~= nil then
    local old = self.saved[name]
    if old then old:free() end
    self.saved[name] = T.keep(t:reshape(t:shape()))
  end
  return t
end

-- Like keep, but takes ownership of t itself (statistics made for the backward): freed
-- now when grad is disabled.
function Module:keep_owned(name, t)
  if self.grad_enabled then
    local old = self.saved[name]
    if old then old:free() end
    self.saved[name] = T.keep(t)
  else
    t:free()
  end
end

-- The saved tensor, or a user error when forward ran without grad (or backward ran twice).
function Module:saved_tensor(name)
  local t = self.saved[name]
  if not t then
    errors.user("%s:backward: nothing saved from forward (%s): run forward in train mode or with " ..
      "set_grad_enabled(true), once per backward", self.__name, name)
  end
  return t
end

-- Releases this module's saved tensors (not its children's).
function Module:release()
  for name, t in pairs(self.saved) do
    if type(t) == "table" and t.free then t:free() end
    self.saved[name] = nil
  end
end

-- Releases the saved tensors of this module and every descendant.
function Module:clear_saved()
  each_module(self, function(m) m:release() end)
end

-- ---------------------------------------------------------------- lifetime
-- Frees parameters, grads and saved state of the whole tree; the module is unusable after.
function Module:free()
  each_module(self, function(m)
    m:release()
    for _, entry in ipairs(m._params) do
      local p = entry[2]
      if p.value then p.value:free() end
      if p.grad then p.grad:free(); p.grad = nil end
    end
  end)
end

-- Default forward/backward: a module must define its own.
function Module:forward()
  errors.user("%s has no forward", self.__name)
end

function Module:backward()
  errors.user("%s has no backward", self.__name)
end

return Module
