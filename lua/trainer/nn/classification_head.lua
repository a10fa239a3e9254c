-- trainer.nn.ClassificationHead: a classification head on the first token's hidden row,
--   logits = out(dropout(act(dense(dropout_in(hidden[:, 0])))))
-- as transformers' RobertaClassificationHead (dropout_in, dense, tanh, dropout, out_proj) and
-- DistilBERT's (pre_classifier, ReLU, dropout, classifier) compute it. The child names are the
-- family's (opts.dense, opts.out), relative to where the head is added.
-- forward(hidden [B, T, C]) -> [B, K]; backward(dlogits) -> dhidden [B, T, C] (zero outside
-- row 0). Dropout sites: (head layer, rng_sites.dropout.head) after the activation; the
-- optional input dropout draws (head layer, rng_sites.dropout.head_input).
local Module = require("trainer.nn.module")
local Linear = require("trainer.nn.linear")
local Dropout = require("trainer.nn.dropout")
local sites = require("trainer.core.rng_sites")
local ops = require("trainer.core.ops")
local T = require("trainer.core.tensor")

local Head = Module:extend("ClassificationHead")

-- C hidden size, K labels; opts: dense, out (child names), act ("tanh" or "relu"), p (the
-- dropouts' probability), input_dropout (bool: RoBERTa's dropout before dense), rng, layer
-- (the head's dropout layer id), device.
function Head.new(C, K, opts)
  local self = Head:create()
  self.act = opts.act
  if opts.input_dropout then
    self:add_module("dropout_in", Dropout.new(opts.p, opts.rng, opts.layer, sites.dropout.head_input))
  end
  self:add_module(opts.dense, Linear.new(C, C, { device = opts.device }), "dense")
  self:add_module("dropout", Dropout.new(opts.p, opts.rng, opts.layer, sites.dropout.head))
  self:add_module(opts.out, Linear.new(C, K, { device = opts.device }), "out")
  return self
end

local function activate(self, x)
  if self.act == "tanh" then return ops.tanh(x) end
  return ops.gelu(x, ops.RELU)
end

-- each intermediate dies once the next one is made; kept: the activation's output (tanh) or
-- input (ReLU), and a view of hidden for the first-token gradient's shape
function Head:forward(hidden)
  local logits = T.scope(function()
    local a = T.scope(function()
      local first = ops.pool(hidden, nil, "cls")
      if self.dropout_in then
        local d = self.dropout_in:forward(first)
        first:free()
        first = d
      end
      local h = self.dense:forward(first)
      first:free()
      local y = activate(self, h)
      if self.grad_enabled then self:keep("act", self.act == "tanh" and y or h) end
      h:free()
      return self.dropout:forward(y)
    end)
    return self.out:forward(a)
  end)
  if self.grad_enabled then self:keep("hidden", hidden) end
  return logits
end

function Head:backward(dlogits)
  local a, hidden = self:saved_tensor("act"), self.saved.hidden
  local dh = T.scope(function()
    local dfirst = T.scope(function()
      local dy = T.scope(function() return self.dropout:backward(self.out:backward(dlogits)) end)
      local dpre = self.act == "tanh" and ops.tanh_backward(dy, a) or ops.gelu_backward(dy, a, ops.RELU)
      local d = self.dense:backward(dpre)
      if self.dropout_in then return self.dropout_in:backward(d) end
      return d
    end)
    return ops.pool_backward(dfirst, hidden, nil, "cls")
  end)
  self:release()
  return dh
end

return Head
