-- trainer.models.bert.encoder (BertEncoder): a stack of Layers registered as "layer.0", "layer.1", ...; forward
-- frees each intermediate hidden state as soon as the next layer has kept what it needs.
-- cfg.relative_attention_num_buckets (a family with a relative-position bias: MPNet): the
-- encoder owns the bias table "relative_attention_bias" (an Embedding [num_buckets, heads],
-- registered after the layers as transformers does), which every layer's attention adds to
-- its scores (bucketed with cfg.relative_attention_max_distance, default 128) and whose
-- gradient every layer's backward accumulates.
-- opts (a family whose layers are not BERT's: ModernBERT): layer(i), the layer of index i
-- (0-based), and prefix, its children's names' ("layers." for "layers.0", ...).
local Module = require("trainer.nn.module")
local BertLayer = require("trainer.models.bert.layer")
local Embedding = require("trainer.nn.embedding")

local BertEncoder = Module:extend("BertEncoder")

function BertEncoder.new(cfg, rng, opts)
  opts = opts or {}
  local self = BertEncoder:create()
  self.layers = {}
  local bias, rel = nil, nil
  if cfg.relative_attention_num_buckets then
    bias = Embedding.new(cfg.relative_attention_num_buckets, cfg.num_attention_heads, { device = cfg.device })
    rel = { weight = bias.weight, max_distance = cfg.relative_attention_max_distance or 128 }
  end
  local new_layer = opts.layer or function(i) return BertLayer.new(cfg, rng, i + 1, rel) end
  for i = 0, cfg.num_hidden_layers - 1 do
    self.layers[i + 1] = self:add_module((opts.prefix or "layer.") .. i, new_layer(i), false)
  end
  if bias then self:add_module("relative_attention_bias", bias) end
  return self
end

-- rows: a trainer.nn.row_pick or nil: the last layer (or segment) computes those rows only
-- past its attention core, and the result is [B, C] (see BertLayer:forward).
function BertEncoder:forward(x, mask, rows)
  local h = x:reshape(x:shape())
  local n = #self.layers
  for i, layer in ipairs(self.layers) do
    -- prev: the layer whose output h is (BertLayer remakes its input from it)
    local nh = layer:forward(h, mask, i == n and rows or nil, self.layers[i - 1])
    h:free()
    h = nh
  end
  return h
end

-- want_dx = false: the caller needs no gradient of the encoder's input (frozen embeddings, as
-- under LoRA), so the first layer skips the products that only feed it; returns nil then.
function BertEncoder:backward(dy, want_dx)
  local g = dy:reshape(dy:shape())
  for i = #self.layers, 1, -1 do
    local ng = self.layers[i]:backward(g, i > 1 or want_dx)
    g:free()
    g = ng
  end
  return g
end

return BertEncoder
