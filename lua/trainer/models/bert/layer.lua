-- trainer.models.bert.layer (BertLayer): one BERT encoder layer = BertAttention ("attention") then BertFeedForward
-- (transparent: "intermediate.*", "output.*"), so parameter names are exactly
-- encoder.layer.N.attention.self.query.weight, encoder.layer.N.output.dense.bias, ...
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local BertAttention = require("trainer.models.bert.attention")
local BertFeedForward = require("trainer.models.bert.feedforward")
local packing = require("trainer.nn.packing")

local BertLayer = Module:extend("BertLayer")

-- The Linear layers of one encoder layer, named relative to it ("attention.self.query",
-- "output.dense", ...): { name, in, out } in parameter order, from the blocks' own lists, so
-- the planner (trainer.plan) counts what the model builds. cfg: hidden_size, intermediate_size.
-- cfg.attention_name: where the attention block sits ("attention" default; "" transparent,
-- its children's names then relative to the layer, as DistilBERT's sa_layer_norm).
function BertLayer.linears(cfg)
  local out = {}
  local at = cfg.attention_name or "attention"
  at = at == "" and "" or at .. "."
  for _, l in ipairs(BertAttention.linears(cfg)) do out[#out + 1] = { at .. l[1], l[2], l[3] } end
  for _, l in ipairs(BertFeedForward.linears(cfg)) do out[#out + 1] = { l[1], l[2], l[3] } end
  return out
end

-- layer: the dropout layer id (1-based for encoder layers; 0 is the embeddings); rel: the
-- encoder's relative-position bias (nn.attention) or nil.
function BertLayer.new(cfg, rng, layer, rel)
  local self = BertLayer:create()
  self:add_module(cfg.attention_name or "attention", BertAttention.new(cfg, rng, layer, rel), "attention")
  self:add_module("", BertFeedForward.new(cfg, rng, layer), "ffn")
  return self
end

-- mask: [B, T] or nil, or a packing (trainer.nn.packing) when x is the packed real rows.
-- rows: a trainer.nn.row_pick (the encoder's last layer under a head that reads the first rows
-- only): past the attention core the layer runs on those rows, and returns [B, C].
function BertLayer:forward(x, mask, rows)
  local pk = packing.is(mask) and mask or nil
  -- the attention output dies once the feed-forward's is made
  return T.scope(function() return self.ffn:forward(self.attention:forward(x, mask, rows), rows or pk) end)
end

-- want_dx = false: no input gradient is owed (the first layer over frozen embeddings); nil then.
function BertLayer:backward(dy, want_dx)
  -- the feed-forward's input gradient dies once the attention's is made
  local dx = T.scope(function() return self.attention:backward(self.ffn:backward(dy), want_dx) end)
  -- under mpirun, on a step's last micro-batch: this layer's gradients are final, and
  -- trainer.dist starts the all-reduce of the buckets they complete (DDP's overlap)
  if self.on_grads_final then self.on_grads_final() end
  return dx
end

return BertLayer
