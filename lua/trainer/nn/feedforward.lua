-- trainer.nn.FeedForward: BERT's feed-forward block, post-LN:
--   y = LayerNorm(x + Dropout(Dense2(act(Dense1(x)))))
-- Children carry the Hugging Face names relative to the layer: intermediate.dense,
-- output.dense, output.LayerNorm (the block is added to the layer under "", transparent).
-- act is GELU (erf or tanh form, from hidden_act). Dropout site: (layer, op 3).
local Module = require("trainer.nn.module")
local Linear = require("trainer.nn.linear")
local LayerNorm = require("trainer.nn.layernorm")
local Dropout = require("trainer.nn.dropout")
local ops = require("trainer.ops")

local FeedForward = Module:extend("FeedForward")

function FeedForward.new(cfg, rng, layer)
  local self = FeedForward:create()
  local C, I, o = cfg.hidden_size, cfg.intermediate_size, { device = cfg.device }
  self.act = ops.gelu_kind(cfg.hidden_act or "gelu")
  self:add_module("intermediate.dense", Linear.new(C, I, o), "dense1")
  self:add_module("output.dense", Linear.new(I, C, o), "dense2")
  self:add_module("output.LayerNorm", LayerNorm.new(C, { eps = cfg.layer_norm_eps, device = cfg.device }), "norm")
  self:add_module("output.dropout", Dropout.new(cfg.hidden_dropout_prob, rng, layer, 3), "dropout")
  return self
end

function FeedForward:forward(x)
  local h = self.dense1:forward(x)
  local a = ops.gelu(h, self.act)
  self:keep("h", h)
  h:free()
  local o = self.dense2:forward(a)
  a:free()
  local od = self.dropout:forward(o)
  o:free()
  local sum = ops.add(od, x)
  od:free()
  local y = self.norm:forward(sum)
  sum:free()
  return y
end

function FeedForward:backward(dy)
  local h = self:saved_tensor("h")
  local dsum = self.norm:backward(dy)
  local dod = self.dropout:backward(dsum)
  local da = self.dense2:backward(dod)
  dod:free()
  local dh = ops.gelu_backward(da, h, self.act)
  da:free()
  self:release()
  local g = self.dense1:backward(dh)
  dh:free()
  ops.add_(dsum, g)
  g:free()
  return dsum
end

return FeedForward
