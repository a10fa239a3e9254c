-- trainer.nn.Layer: one BERT encoder layer = SelfAttention ("attention") then FeedForward
-- (transparent: "intermediate.*", "output.*"), so parameter names are exactly
-- encoder.layer.N.attention.self.query.weight, encoder.layer.N.output.dense.bias, ...
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local SelfAttention = require("trainer.nn.attention")
local FeedForward = require("trainer.nn.feedforward")
local packing = require("trainer.nn.packing")

local Layer = Module:extend("Layer")

-- The Linear layers of one encoder layer, named relative to it ("attention.self.query",
-- "output.dense", ...): { name, in, out } in parameter order, from the blocks' own lists, so
-- the planner (trainer.plan) counts what the model builds. cfg: hidden_size, intermediate_size.
-- cfg.attention_name: where the attention block sits ("attention" default; "" transparent,
-- its children's names then relative to the layer, as DistilBERT's sa_layer_norm).
function Layer.linears(cfg)
  local out = {}
  local at = cfg.attention_name or "attention"
  at = at == "" and "" or at .. "."
  for _, l in ipairs(SelfAttention.linears(cfg)) do out[#out + 1] = { at .. l[1], l[2], l[3] } end
  for _, l in ipairs(FeedForward.linears(cfg)) do out[#out + 1] = { l[1], l[2], l[3] } end
  return out
end

-- layer: the dropout layer id (1-based for encoder layers; 0 is the embeddings); rel: the
-- encoder's relative-position bias (nn.attention) or nil.
function Layer.new(cfg, rng, layer, rel)
  local self = Layer:create()
  self:add_module(cfg.attention_name or "attention", SelfAttention.new(cfg, rng, layer, rel), "attention")
  self:add_module("", FeedForward.new(cfg, rng, layer), "ffn")
  return self
end

-- mask: [B, T] or nil, or a packing (trainer.nn.packing) when x is the packed real rows.
function Layer:forward(x, mask)
  local pk = packing.is(mask) and mask or nil
  -- the attention output dies once the feed-forward's is made
  return T.scope(function() return self.ffn:forward(self.attention:forward(x, mask), pk) end)
end

-- want_dx = false: no input gradient is owed (the first layer over frozen embeddings); nil then.
function Layer:backward(dy, want_dx)
  -- the feed-forward's input gradient dies once the attention's is made
  local dx = T.scope(function() return self.attention:backward(self.ffn:backward(dy), want_dx) end)
  -- under mpirun, on a step's last micro-batch: this layer's gradients are final, and
  -- trainer.dist starts the all-reduce of the buckets they complete (DDP's overlap)
  if self.on_grads_final then self.on_grads_final() end
  return dx
end

return Layer
