-- recipes/base/lora_bf16.lua — the low-memory profile: bf16 mixed precision, gradient
-- checkpointing and LoRA on the attention query and value projections. Extends the team's
-- embedding defaults; the shared sizes live in recipes/base/sizes.lua (a plain Lua module
-- that recipes require).
local sizes = require("sizes")

return {
  extends = "embedding.lua",
  precision = "bf16",
  checkpoint = { segments = 4 },
  lora = { r = 8, alpha = 16, dropout = 0.1, targets = { "query", "value" } },
  memory = { limit = sizes.gpu_budget },
}
