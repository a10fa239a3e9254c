-- trainer.nn.Encoder: a stack of Layers registered as "layer.0", "layer.1", ...; forward
-- frees each intermediate hidden state as soon as the next layer has kept what it needs.
local Module = require("trainer.nn.module")
local Layer = require("trainer.nn.layer")

local Encoder = Module:extend("Encoder")

function Encoder.new(cfg, rng)
  local self = Encoder:create()
  self.layers = {}
  for i = 0, cfg.num_hidden_layers - 1 do
    self.layers[i + 1] = self:add_module("layer." .. i, Layer.new(cfg, rng, i + 1), false)
  end
  return self
end

function Encoder:forward(x, mask)
  local h = x:reshape(x:shape())
  for _, layer in ipairs(self.layers) do
    local nh = layer:forward(h, mask)
    h:free()
    h = nh
  end
  return h
end

-- want_dx = false: the caller needs no gradient of the encoder's input (frozen embeddings, as
-- under LoRA), so the first layer skips the products that only feed it; returns nil then.
function Encoder:backward(dy, want_dx)
  local g = dy:reshape(dy:shape())
  for i = #self.layers, 1, -1 do
    local ng = self.layers[i]:backward(g, i > 1 or want_dx)
    g:free()
    g = ng
  end
  return g
end

return Encoder
