-- trainer.train.clip: gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_.
--
--   local norm = clip.clip_grad_norm(params, max_norm)
--
-- params: a list of tensors, or parameter records ({ grad = tensor, trainable = bool };
-- a list, a map or an iterator of (name, record), as trainer.optim accepts). The total
-- norm is the L2 norm over every gradient of a trainable parameter; when
-- coef = max_norm / (norm + 1e-6) is below 1 every gradient is multiplied by it (computed
-- in f32 as torch does). Returns the norm before clipping. A non-finite norm is returned
-- and the gradients are left alone (torch would turn them all NaN): the caller skips the
-- step, as the loss scaler does.
--
--   local norm = clip.clip_grad_norm_into(params, max_norm, found_inf)   -- on a device
--
-- The same clip without a host read: the norm goes into a device tensor, the
-- coefficient is computed and applied on the device (ops.clip_by_norm_), and the norm comes
-- back as a trainer.train.deferred value, read when the step is logged. A non-finite norm
-- leaves the gradients alone and sets found_inf (a { 1 } i32 tensor, may be nil), which
-- makes the optimizer's AdamW skip the step on the device. On the CPU its result and the
-- clipped gradients are clip_grad_norm's bits.
local ffi = require("ffi")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local errors = require("trainer.core.errors")
local deferred = require("trainer.train.deferred")

local M = {}

local function grads_of(params)
  local list = {}
  local function add(x)
    if T.is_tensor(x) then list[#list + 1] = x
    elseif type(x) == "table" and x.trainable ~= false and x.grad then list[#list + 1] = x.grad end
  end
  if type(params) == "function" then
    for _, x in params do add(x) end
  elseif type(params) == "table" and type(params.parameters) == "function" then
    for _, x in params:parameters() do add(x) end
  elseif type(params) == "table" and (params[1] ~= nil or next(params) == nil) then
    for _, x in ipairs(params) do add(x) end
  elseif type(params) == "table" then
    for _, x in pairs(params) do add(x) end
  else
    errors.user("clip_grad_norm: params must be a list of tensors or parameter records, got %s", type(params))
  end
  return list
end
M.grads_of = grads_of

-- The gradients of params, after checking max_norm.
local function checked_grads(params, max_norm)
  if type(max_norm) ~= "number" or not (max_norm > 0) then
    errors.user("clip_grad_norm: max_norm must be a number > 0 (grad_clip in the recipe), got %s", tostring(max_norm))
  end
  return grads_of(params)
end

local f32 = ffi.new("float[4]")

function M.clip_grad_norm(params, max_norm)
  local grads = checked_grads(params, max_norm)
  if #grads == 0 then return 0 end
  local norm = ops.global_norm(grads)
  if norm ~= norm or norm == math.huge then return norm end
  -- torch: clip_coef = max_norm / (total_norm + 1e-6) in float32, clamped to 1
  f32[0], f32[1], f32[2] = norm, 1e-6, max_norm
  f32[3] = f32[0] + f32[1]
  f32[3] = f32[2] / f32[3]
  local coef = tonumber(f32[3])
  if coef < 1 then
    for _, g in ipairs(grads) do ops.scale_(g, coef) end
  end
  return norm
end

function M.clip_grad_norm_into(params, max_norm, found_inf)
  local grads = checked_grads(params, max_norm)
  if #grads == 0 then return 0 end
  local norm = ops.global_norm_into(grads)
  local ok, err = pcall(ops.clip_by_norm_, grads, norm, max_norm, found_inf)
  if not ok then norm:free() error(err, 0) end
  return deferred.own(norm)
end

return M
