-- trainer.nn: the module classes (each in its own file, loaded on first use).
--   local nn = require("trainer.nn"); local lin = nn.Linear.new(32, 64)
local files = {
  Module = "trainer.nn.module", Linear = "trainer.nn.linear", Embedding = "trainer.nn.embedding",
  LayerNorm = "trainer.nn.layernorm", Dropout = "trainer.nn.dropout", SelfAttention = "trainer.nn.attention",
  FeedForward = "trainer.nn.feedforward", Layer = "trainer.nn.layer", Encoder = "trainer.nn.encoder",
  Embeddings = "trainer.nn.embeddings", Pooling = "trainer.nn.pooling", Normalize = "trainer.nn.normalize",
  Pooler = "trainer.nn.pooler",
}

return setmetatable({}, {
  __index = function(t, k)
    local name = files[k]
    if not name then return nil end
    local mod = require(name)
    rawset(t, k, mod)
    return mod
  end,
})
