-- tests/cudacpu/small_vocab_model.lua — a model folder whose embedding has 5 rows beside the
-- tiny tokenizer, whose ids go past them (train_infer.sh: `trainer encode`/`classify` must
-- refuse such ids on both devices):
--   ./trainer run tests/cudacpu/small_vocab_model.lua DIR embedding|classification
local dir, task = arg[1], arg[2]
if not dir or (task ~= "embedding" and task ~= "classification") then
  error("usage: trainer run tests/cudacpu/small_vocab_model.lua DIR embedding|classification", 0)
end
local models = require("trainer.models")
local bert = require("trainer.models.bert")
local json = require("trainer.core.json")
models.tiny_folder(dir, { task = task, seed = 3 })
local f = assert(io.open(dir .. "/config.json", "rb"))
local raw = json.decode(f:read("*a"))
f:close()
raw.vocab_size = 5
f = assert(io.open(dir .. "/config.json", "wb"))
assert(f:write(json.encode(raw, 2), "\n"))
assert(f:close())
local cfg = bert.config(raw, dir .. "/config.json")
local model = bert.BertModel.new(cfg, { seed = 3 })
if task == "classification" then model = bert.SequenceClassifier.new(model, 3, { seed = 3 }) end
require("trainer.core.safetensors").save(dir .. "/model.safetensors", bert.state_list(model))
model:free()
