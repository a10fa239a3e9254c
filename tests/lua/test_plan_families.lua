-- trainer.plan against measurement for the families other than BERT (tests/lua/test_plan.lua
-- holds BERT's): a small DistilBERT, a RoBERTa classifier (its first-token head) and an MPNet
-- classifier (its relative-position bias), the
-- predicted bytes per tag within 15 % (or 64 KiB) of the allocator's peaks of a steady-state
-- training step, full and under LoRA (the family's default targets), bf16 and checkpointing.
local pm = dofile(require("trainer.native").root() .. "/tests/lua/plan_measure.lua")

local shapes = {
  distilbert = { dim = 64, n_layers = 4, n_heads = 4, hidden_dim = 256, vocab_size = 500, max_position_embeddings = 512 },
  roberta = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256, vocab_size = 500,
              max_position_embeddings = 514, pad_token_id = 1, type_vocab_size = 1 },
  mpnet = { hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 256, vocab_size = 500,
            max_position_embeddings = 514, layer_norm_eps = 1e-5, relative_attention_num_buckets = 32 },
}
local function compare(arch, spec) pm.compare(arch, shapes[arch], spec) end

local lora_default = { r = 8, alpha = 16 }   -- targets: the family's (q_lin, v_lin; query, value)

return {
  { "distilbert_fp32", function() compare("distilbert", {}) end },
  { "distilbert_lora", function() compare("distilbert", { lora = lora_default }) end },
  { "distilbert_bf16_checkpoint_lora", function()
    compare("distilbert", { lora = lora_default, precision = "bf16", checkpoint = "auto" })
  end },
  { "distilbert_lora_head_saved", function()
    compare("distilbert", { lora = { r = 8, alpha = 16, modules_to_save = { "pre_classifier", "classifier" } } })
  end },
  { "roberta_head_fp32", function() compare("roberta", {}) end },
  { "roberta_head_lora", function() compare("roberta", { lora = { r = 8, alpha = 16, modules_to_save = { "classifier" } } }) end },
  -- MPNet: its bias table beside the embeddings, LoRA on q and v
  { "mpnet_fp32", function() compare("mpnet", {}) end },
  { "mpnet_lora", function() compare("mpnet", { lora = lora_default }) end },
  { "mpnet_bf16_checkpoint_lora", function()
    compare("mpnet", { lora = lora_default, precision = "bf16", checkpoint = "auto" })
  end },
  { "mpnet_checkpoint_fp32", function() compare("mpnet", { checkpoint = "auto" }) end },
}
