-- trainer.models.bert.pooler (BertPooler): BERT's pooler, tanh(dense(hidden[:, 0])) (child "dense", so names are
-- pooler.dense.weight / pooler.dense.bias). forward(hidden [B, T, C]) -> [B, C]; keeps the
-- tanh output (its backward needs only that) and a view of hidden for the shape.
local Module = require("trainer.nn.module")
local Linear = require("trainer.nn.linear")
local ops = require("trainer.core.ops")
local T = require("trainer.core.tensor")

local BertPooler = Module:extend("BertPooler")

function BertPooler.new(cfg)
  local self = BertPooler:create()
  self:add_module("dense", Linear.new(cfg.hidden_size, cfg.hidden_size, { device = cfg.device }))
  return self
end

-- the first token's row dies before the tanh, the dense output after it
function BertPooler:forward(hidden)
  local y = T.scope(function()
    local d = T.scope(function() return self.dense:forward(ops.pool(hidden, nil, "cls")) end)
    return ops.tanh(d)
  end)
  self:keep("y", y)
  self:keep("hidden", hidden)
  return y
end

-- the tanh's gradient dies before the pooling's backward, the dense's after it
function BertPooler:backward(dy)
  local y, hidden = self:saved_tensor("y"), self.saved.hidden
  local dh = T.scope(function()
    local dfirst = T.scope(function() return self.dense:backward(ops.tanh_backward(dy, y)) end)
    return ops.pool_backward(dfirst, hidden, nil, "cls")
  end)
  self:release()
  return dh
end

return BertPooler
