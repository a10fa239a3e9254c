-- trainer.nn.Pooler: BERT's pooler, tanh(dense(hidden[:, 0])) (child "dense", so names are
-- pooler.dense.weight / pooler.dense.bias). forward(hidden [B, T, C]) -> [B, C]; keeps the
-- tanh output (its backward needs only that) and a view of hidden for the shape.
local Module = require("trainer.nn.module")
local Linear = require("trainer.nn.linear")
local ops = require("trainer.core.ops")

local Pooler = Module:extend("Pooler")

function Pooler.new(cfg)
  local self = Pooler:create()
  self:add_module("dense", Linear.new(cfg.hidden_size, cfg.hidden_size, { device = cfg.device }))
  return self
end

function Pooler:forward(hidden)
  local first = ops.pool(hidden, nil, "cls")
  local d = self.dense:forward(first)
  first:free()
  local y = ops.tanh(d)
  d:free()
  self:keep("y", y)
  self:keep("hidden", hidden)
  return y
end

function Pooler:backward(dy)
  local y, hidden = self:saved_tensor("y"), self.saved.hidden
  local dd = ops.tanh_backward(dy, y)
  local dfirst = self.dense:backward(dd)
  dd:free()
  local dh = ops.pool_backward(dfirst, hidden, nil, "cls")
  dfirst:free()
  self:release()
  return dh
end

return Pooler
