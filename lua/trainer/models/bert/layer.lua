-- trainer.models.bert.layer (BertLayer): one BERT encoder layer = BertAttention ("attention") then BertFeedForward
-- (transparent: "intermediate.*", "output.*"), so parameter names are exactly
-- encoder.layer.N.attention.self.query.weight, encoder.layer.N.output.dense.bias, ...
local Module = require("trainer.nn.module")
local T = require("trainer.core.tensor")
local BertAttention = require("trainer.models.bert.attention")
local BertFeedForward = require("trainer.models.bert.feedforward")
local packing = require("trainer.nn.packing")
local Linear = require("trainer.nn.linear")
local add_norm = require("trainer.nn.dropout_add_norm")

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

-- Drops the inputs the Linears among ms kept (Linear.drop_input); true when there were any.
local function drop_inputs(ms)
  local dropped = false
  for _, m in ipairs(ms) do dropped = Linear.drop_input(m) or dropped end
  return dropped
end

-- Gives each of ms a view of y (Linear.give_input), then lets y's handle go.
local function give_input(ms, y)
  for _, m in ipairs(ms) do Linear.give_input(m, y) end
  y:free()
end

-- mask: [B, T] or nil, or a packing (trainer.nn.packing) when x is the packed real rows.
-- rows: a trainer.nn.row_pick (the encoder's last layer under a head that reads the first rows
-- only): past the attention core the layer runs on those rows, and returns [B, C].
-- prev: the layer whose output x is (the encoder's and a checkpoint segment's loops pass it).
-- A post-LN block's output is what the next Linears keep for their weight gradients (the
-- feed-forward's first dense, the next layer's query, key and value): as f32 it is dropped
-- after the forward and remade in the backward from what the block's LayerNorm keeps anyway
-- (nn.dropout_add_norm.remake: the same bits), N x C fewer kept twice per layer.
function BertLayer:forward(x, mask, rows, prev)
  local pk = packing.is(mask) and mask or nil
  -- the attention output dies once the feed-forward's is made
  local y = T.scope(function() return self.ffn:forward(self.attention:forward(x, mask, rows), rows or pk) end)
  -- (the layer the input is remade from stays out of saved, whose release frees tensors)
  self.input_from = nil
  if self.grad_enabled then
    local a, f = self.attention, self.ffn
    if add_norm.remakeable(a.norm) and drop_inputs({ f.dense1 }) then self.saved.remake_ffn_input = true end
    if getmetatable(prev) == BertLayer and add_norm.remakeable(prev.ffn.norm)
        and drop_inputs({ a.query, a.key, a.value }) then
      self.input_from = prev
    end
  end
  return y
end

-- want_dx = false: no input gradient is owed (the first layer over frozen embeddings); nil then.
function BertLayer:backward(dy, want_dx)
  local from, a, f = self.input_from, self.attention, self.ffn
  if self.saved.remake_ffn_input then give_input({ f.dense1 }, add_norm.remake(a.dropout, a.norm)) end
  self.saved.remake_ffn_input, self.input_from = nil, nil
  -- the feed-forward's input gradient dies once the attention's is made
  local dx = T.scope(function()
    local dh = f:backward(dy)
    if from then give_input({ a.query, a.key, a.value }, add_norm.remake(from.ffn.dropout, from.ffn.norm)) end
    return a:backward(dh, want_dx)
  end)
  -- under mpirun, on a step's last micro-batch: this layer's gradients are final, and
  -- trainer.dist starts the all-reduce of the buckets they complete (DDP's overlap)
  if self.on_grads_final then self.on_grads_final() end
  return dx
end

return BertLayer
