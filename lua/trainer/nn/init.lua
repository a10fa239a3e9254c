-- trainer.nn: the module classes any model family builds from (each in its own file, loaded
-- on first use). A family's own blocks live beside its file in lua/trainer/models/.
--   local nn = require("trainer.nn"); local lin = nn.Linear.new(32, 64)
local files = {
  Module = "trainer.nn.module", Linear = "trainer.nn.linear", Embedding = "trainer.nn.embedding",
  LayerNorm = "trainer.nn.layernorm", Dropout = "trainer.nn.dropout", Pooling = "trainer.nn.pooling",
  Normalize = "trainer.nn.normalize",
}

return setmetatable({}, { __index = require("trainer.core.lazy").index(files) })
