-- tests/cli/make_cls_adapter.lua MODEL_OUT ADAPTER_OUT — writes a tiny random BERT
-- classifier folder and a LoRA adapter for it (query, value, modules_to_save classifier)
-- whose B matrices and classifier are not at their initial values, so that applying the
-- adapter changes the outputs (test_adapter.sh compares --adapter with the merged model).
local models = require("trainer.models")
local lora = require("trainer.train.lora")
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local model_dir, adapter_dir = arg[1], arg[2]
models.tiny_folder(model_dir, { seed = 4, task = "classification" })
local model = models.load_model(model_dir, { on_warning = function() end })
lora.apply(model, { r = 4, alpha = 8, dropout = 0.1, targets = { "query", "value" }, modules_to_save = { "classifier" } })
local k = 0
for name, p in model:parameters() do
  if p.trainable then
    k = k + 1
    local r = T.randn(p.value:shape(), { seed = 100 + k })
    ops.axpy_(p.value, r, name:find("lora_B", 1, true) and 0.3 or 0.05)
    r:free()
  end
end
lora.save(model, adapter_dir, nil, model_dir)
model:free()
print("ok")
return 0
