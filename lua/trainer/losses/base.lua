-- trainer.losses.base: what every loss shares. A loss works on embeddings (tensors [B, C]
-- that the model produced, one per input column) and follows one protocol:
--
--   local value = loss:forward(embeddings_list, labels)   -- a Lua number (or, built with
--                                    -- opts.deferred, a trainer.train.deferred value)
--   local grads = loss:backward()    -- one gradient per embeddings tensor, in order:
--                                    -- new tensors (f32) that the caller frees
--   for name, p in loss:parameters() do ... end   -- weights the loss owns (SoftmaxLoss)
--   loss:free()                      -- releases saved state and owned weights
--
-- Invariants: forward saves what backward needs and nothing else; backward (or the next
-- forward, or release()) frees it, so a loss never holds memory across steps. A forward
-- or backward runs its temporaries in a T.scope: what it saves is marked kept (save), what
-- it returns leaves the scope, everything else is freed when the scope ends, also on an error. The
-- embeddings and labels are the caller's: a loss reads them, never frees them. Owned
-- parameter gradients ACCUMULATE (+=) like the model's; the loop zeroes them.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local errors = require("trainer.core.errors")

local M = {}

local Loss = {}
Loss.__index = Loss
M.Loss = Loss

-- A new loss class inheriting the protocol.
function M.class()
  local cls = setmetatable({}, { __index = Loss })
  cls.__index = cls
  return cls
end

-- ---------------------------------------------------------------- saved state
-- Records tensors the loss made during forward (freed by release) and references to the
-- caller's tensors (never freed).
function Loss:save(owned, refs)
  Loss.release(self)   -- this loss's own state only (a wrapper's inner losses keep theirs)
  for _, t in pairs(owned) do T.keep(t) end
  self._owned = owned
  self._saved = refs
end

function Loss:saved()
  if not self._saved then
    errors.user("%s: backward() called without a forward() before it (each backward needs its own forward)", self.kind)
  end
  return self._saved
end

function Loss:release()
  for _, t in pairs(self._owned or {}) do t:free() end
  self._owned, self._saved = nil, nil
end

-- ---------------------------------------------------------------- targets
-- The integer targets (i64, on device) of this forward: the ones trainer.train.step fed
-- with the batch (loss.fed_targets: already on the device, uploaded on the feed's copy
-- stream, the same values), taken over by the caller, else a new tensor of `values`.
function Loss:targets(values, device)
  local t = self.fed_targets
  if t ~= nil then
    self.fed_targets = nil
    return t
  end
  return T.from_table(values, { dtype = "i64", device = device })
end

-- ---------------------------------------------------------------- the value
-- The number a loss returns from a 1-element loss tensor: t:item(), or, when the loss was
-- built with opts.deferred (a run on a device), a trainer.train.deferred value that is read
-- once per logged step instead of waiting for the device here.
function Loss:value_of(t)
  if self.deferred then return require("trainer.train.deferred").leaf(t) end
  return t:item()
end

-- ---------------------------------------------------------------- parameters
-- The owned parameters: a list of { name, param } that is also a (name, param) iterator,
-- so both `for name, p in loss:parameters() do` and `loss:parameters()[1]` work.
local ParamList = {}
ParamList.__index = ParamList
ParamList.__call = function(list, _, prev)
  local i = (list._pos or 0) + 1
  if prev == nil then i = 1 end
  list._pos = i
  local item = list[i]
  if item then return item[1], item[2] end
end

function Loss:parameters()
  local list = setmetatable({}, ParamList)
  for i, item in ipairs(self._params or {}) do list[i] = item end
  return list
end

function Loss:free()
  self:release()
  for _, item in ipairs(self._params or {}) do
    item[2].value:free()
    if item[2].grad then item[2].grad:free() end
  end
  self._params = {}
end

-- ---------------------------------------------------------------- argument checks
-- Checks the embeddings list: at least `min` (and at most `max`) tensors [B, C] with equal B
-- (and equal C when same_width). Returns B and C.
function M.check_embeddings(kind, embs, min, max, same_width)
  if T.is_tensor(embs) then embs = { embs } end
  if type(embs) ~= "table" or #embs < min or (max and #embs > max) then
    local want = max == min and tostring(min) or (max and ("%d to %d"):format(min, max) or ("at least " .. min))
    errors.user("%s: forward expects a list of %s embeddings tensors [B, C] (one per input column), got %s", kind,
      want, type(embs) == "table" and tostring(#embs) or type(embs))
  end
  local B, width
  for i, e in ipairs(embs) do
    if not T.is_tensor(e) or e:ndim() ~= 2 then
      errors.user("%s: embeddings %d must be a 2-D tensor [B, C], got %s", kind, i,
        T.is_tensor(e) and ("shape {" .. table.concat(e:shape(), ", ") .. "}") or type(e))
    end
    local s = e:shape()
    B, width = B or s[1], width or s[2]
    if s[1] ~= B then
      errors.user("%s: embeddings %d has %d rows but embeddings 1 has %d; every column needs the same batch", kind, i,
        s[1], B)
    end
    if same_width ~= false and s[2] ~= width then
      errors.user("%s: embeddings %d has width %d but embeddings 1 has %d", kind, i, s[2], width)
    end
  end
  return B, width, embs
end

-- Labels as a Lua array of n numbers, from a Lua array or a tensor.
function M.host_labels(kind, labels, n)
  if T.is_tensor(labels) then labels = labels:values() end
  if type(labels) ~= "table" or #labels ~= n then
    errors.user("%s: expects %d labels (one per row), got %s", kind, n,
      type(labels) == "table" and tostring(#labels) or type(labels))
  end
  for i = 1, n do
    if type(labels[i]) ~= "number" or labels[i] ~= labels[i] then
      errors.user("%s: label %d is %s, not a number", kind, i, tostring(labels[i]))
    end
  end
  return labels
end

-- ---------------------------------------------------------------- row helpers
-- Concatenation along dim 0 of tensors with the same width; returns the tensor and whether
-- it is new (a single tensor is returned as it is).
function M.cat_rows(list)
  if #list == 1 then return list[1], false end
  return T.scope(function()
    local rows, width = 0, list[1]:shape()[2]
    for _, t in ipairs(list) do rows = rows + t:shape()[1] end
    local out = T.empty({ rows, width }, { dtype = list[1]:dtype(), device = list[1]:device() })
    local r = 0
    for _, t in ipairs(list) do
      local n = t:shape()[1]
      runtime.check(C.tr_tensor_copy(runtime.ctx, out:narrow(r, n):ptr(), t:ptr()), "cat_rows")
      r = r + n
    end
    return out, true
  end)
end

-- Splits t [k * n, C] into k row blocks of n rows (views that keep the storage alive; the
-- caller frees each); t itself is freed.
function M.split_rows(t, n, k)
  local parts = {}
  for i = 1, k do parts[i] = t:narrow((i - 1) * n, n) end
  t:free()
  return parts
end

-- The device path of the losses over the diagonal of sim = cosine_sim(u, v) (cosent,
-- cosine): op(sim, y, param) gives the loss and d loss / d sim on the device, so nothing is
-- read back; sim is a temporary, the gradient kept for backward. Returns the loss as the loss
-- object returns it (value_of).
function M.score_loss_on_device(loss_obj, op, y, param, embs)
  T.scope(function()
    local loss, dsim = op(ops.cosine_sim(embs[1], embs[2]), y, param)
    loss_obj:save({ dsim = dsim, loss = loss }, { u = embs[1], v = embs[2] })
  end)
  return loss_obj:value_of(loss_obj._owned.loss)
end

-- The forward and backward of the losses over the cosines of the pairs (u_i, v_i) with
-- gold scores y_i (cosent, cosine). forward: embs is the list { u, v } of [B, C], labels
-- the B scores; built deferred, device_op(sim, y, param) gives the loss and d loss / d sim
-- on the device (score_loss_on_device); otherwise host(cos, y) takes the B cosines and
-- the scores as Lua arrays and returns the loss and d loss / d cos_i, in double on the
-- host. backward feeds that gradient, on the diagonal, to the cosine_sim backward.
function M.pair_score_forward(loss_obj, embs, labels, device_op, param, host)
  local B
  local _
  B, _, embs = M.check_embeddings(loss_obj.kind, embs, 2, 2)
  local y = M.host_labels(loss_obj.kind, labels, B)
  if loss_obj.deferred then return M.score_loss_on_device(loss_obj, device_op, y, param, embs) end
  local cos = T.scope(function() return M.diagonal(ops.cosine_sim(embs[1], embs[2]), B) end)
  local loss, dcos = host(cos, y)
  loss_obj:save({}, { u = embs[1], v = embs[2], dcos = dcos })
  return loss
end

function M.pair_score_backward(loss_obj)
  local s, o = loss_obj:saved(), loss_obj._owned
  local grads = T.scope(function()
    return { ops.cosine_sim_backward(o.dsim or M.diag_tensor(s.dcos, s.u:device()), s.u, s.v) }
  end)
  loss_obj:release()
  return grads
end

-- For a forward that computed its input's gradient on the host: saves d (rows of values) and
-- the device of its input for host_grad_backward, and returns value (the loss).
function M.save_host_grad(loss_obj, d, device, value)
  loss_obj:save({}, { d = d, device = device })
  return value
end

-- The backward of a loss whose forward saved its input's gradient with save_host_grad: that
-- gradient as a tensor on the input's device.
function M.host_grad_backward(loss_obj)
  local s = loss_obj:saved()
  local g = T.from_table(s.d, { device = s.device })
  loss_obj:release()
  return { g }
end

-- The diagonal of a square [B, B] tensor as a Lua array.
function M.diagonal(sim, B)
  local v, d = sim:values(), {}
  for i = 1, B do d[i] = v[(i - 1) * B + i] end
  return d
end

-- A [B, B] f32 tensor on `device` with values on the diagonal and zeros elsewhere.
function M.diag_tensor(values, device)
  local B, rows = #values, {}
  for i = 1, B do
    local r = {}
    for j = 1, B do r[j] = 0 end
    r[i] = values[i]
    rows[i] = r
  end
  return T.from_table(rows, { device = device })
end

return M
