-- trainer.plan against measurement for a small ModernBERT classifier (local layers with a window
-- narrower than the sequence): the predicted bytes per tag within 15 % of the allocator's
-- measured peaks of a real training step, under each memory technique (as test_plan.lua for BERT).
local pm = dofile(require("trainer.native").root() .. "/tests/lua/plan_measure.lua")

local shape = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 128,
                vocab_size = 500, pad_token_id = 0, local_attention = 16, global_attn_every_n_layers = 2 }

local function compare(spec) pm.compare("modernbert", shape, spec) end

local lora_default = { r = 8, alpha = 16, dropout = 0.1, bias = "none" }   -- the family's targets

return {
  { "fp32_baseline", function() compare({}) end },
  { "checkpointing_auto", function() compare({ checkpoint = "auto" }) end },
  { "bf16", function() compare({ precision = "bf16" }) end },
  { "lora", function() compare({ lora = lora_default }) end },
  { "all_combined", function() compare({ lora = lora_default, precision = "bf16", checkpoint = "auto", accumulate = 4 }) end },
}
