-- Run by tests/ref/make_tiny_families.py: `trainer run tests/ref/lora_roundtrip_ours.lua MODEL IN OUT`
-- loads the model folder MODEL, applies the PEFT adapter folder IN with trainer.lora.load and
-- saves it into OUT with trainer.lora.save, for PEFT to load back.
local lora = require("trainer.train.lora")
local root = require("trainer.native").root()

local model_dir, adapter, out = arg[1], arg[2], arg[3]
assert(model_dir and adapter and out, "usage: trainer run tests/ref/lora_roundtrip_ours.lua MODEL IN OUT")
local model = trainer.load_model(root .. "/" .. model_dir)
lora.load(model, adapter)
lora.save(model, out, nil, model_dir)
model:free()
