-- Run by tests/ref/make_lora_golden.py: `trainer run tests/ref/lora_save_ours.lua OUT` applies the
-- golden's set-up b to tests/data/tiny_bert with trainer.lora, sets its A/B values from
-- tests/data/lora_golden.safetensors (b.set.*) and saves the adapter into OUT with
-- trainer.lora.save, for PEFT to load.
local lora = require("trainer.train.lora")
local st = require("trainer.core.safetensors")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local root = require("trainer.native").root()

local out = assert(arg[1], "usage: trainer run tests/ref/lora_save_ours.lua OUT")
local model = trainer.load_model(root .. "/tests/data/tiny_bert")
lora.apply(model, { r = 2, alpha = 4, rslora = true, bias = "all",
  targets = { "attention.output.dense", "intermediate.dense" } })
local g = st.load(root .. "/tests/data/lora_golden.safetensors")
local params = model:parameter_map()
for _, key in ipairs(g:names()) do
  local name = key:match("^b%.set%.(.+)$")
  if name then
    local t = g:tensor(key)
    runtime.check(C.tr_tensor_copy(runtime.ctx, params[name].value:ptr(), t:ptr()), "copy")
    t:free()
  end
end
g:close()
lora.save(model, out, nil, "tests/data/tiny_bert")
model:free()
