-- The weights ledger of a full fine-tune is the parameters' bytes:
-- loading reads each tensor into the parameter's own memory and saving writes safetensors
-- from it, so no moment holds a second copy of a tensor tagged "weights". On a tiny
-- random BERT (always) and on a short fp32 full fine-tune of all-MiniLM-L6-v2 with a
-- checkpoint save (skipped when models/all-MiniLM-L6-v2 is absent): summary.json's
-- peak_by_tag.weights equals the sum of the parameters' bytes (the allocator's 512-byte blocks).
local outputs = require("trainer.train.outputs")
local fs = require("trainer.core.fs")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")
local json = require("trainer.core.json")
local native = require("trainer.native")
local memory = require("trainer.core.memory")

local root = native.root()
local minilm = root .. "/models/all-MiniLM-L6-v2"
local tests = {}
local tmp

local function tmpdir()
  if tmp then return tmp end
  tmp = os.tmpname()
  os.remove(tmp)
  outputs.mkdir(tmp)
  return tmp
end

-- Runs a 1-step full fp32 fine-tune of model_dir with a final save; returns the summary
-- and the bytes of the model's parameters (counted from the loaded model itself).
local function full_finetune(name, model_dir)
  local d = tmpdir()
  local path = ("%s/%s.lua"):format(d, name)
  local f = assert(io.open(path, "w"))
  f:write(([[
return {
  model = { from = %q, max_length = 16 },
  data = { train = %q, columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosine" }, optim = { name = "adamw", lr = 1e-5 }, batch = { size = 2 }, steps = 1,
  precision = "fp32", eval = { at_start = false }, save = { final = true }, log = { quiet = true },
  device = "cpu", out = %q,
}
]]):format(model_dir, root .. "/data/stsb_train.jsonl.gz", d .. "/" .. name))
  f:close()
  local param_bytes = 0
  local r = recipe.load(path)
  r.recipe.hooks = { on_step = function(t)
    param_bytes = 0
    -- as the allocator counts them: each block rounded up to 512 bytes
    for _, p in t.model:parameters() do param_bytes = param_bytes + math.ceil(p.value:nbytes() / 512) * 512 end
  end }
  -- the ledger starts from what is live now (other tests' leftovers are not this run's;
  -- the ones only the GC still holds are collected first, so none is freed mid-run)
  collectgarbage("collect")
  collectgarbage("collect")
  memory.reset_peak()
  local base = memory.stats().by_tag.weights
  local rc = loop.train(r, { quiet = true })
  assert(rc == 0, name .. ": exit " .. tostring(rc))
  assert(fs.exists(d .. "/" .. name .. "/checkpoint-1/model.safetensors"), name .. ": no checkpoint saved")
  local s = json.decode(outputs.read(d .. "/" .. name .. "/summary.json"))
  return s, param_bytes, base
end

tests[#tests + 1] = { "tiny_full_finetune_weights_peak_is_parameters", function()
  local d = tmpdir()
  require("trainer.models").tiny_folder(d .. "/tiny", { seed = 9 })
  local s, bytes, base = full_finetune("tiny", d .. "/tiny")
  assert(bytes > 0)
  local w = s.peak_by_tag.weights - base
  assert(w == bytes, ("peak weights %d bytes, the parameters hold %d"):format(w, bytes))
end }

tests[#tests + 1] = { "minilm_full_finetune_weights_peak_is_parameters", function()
  if not fs.exists(minilm .. "/model.safetensors") then
    print("SKIP test_weights_peak.minilm: " .. minilm .. " is absent (run `make fetch-models`)")
    return
  end
  local s, bytes, base = full_finetune("minilm", minilm)
  local w = s.peak_by_tag.weights - base
  -- all-MiniLM-L6-v2's weights: 4 bytes x 22.57 M parameters, within 5 %
  local want = 4 * 22.57e6
  assert(math.abs(w - want) <= 0.05 * want, ("peak weights %.1f MB, expected %.1f MB +- 5 %%"):format(w / 1e6, want / 1e6))
  assert(w == bytes, ("peak weights %d bytes, the parameters hold %d"):format(w, bytes))
end }

tests[#tests + 1] = { "cleanup", function()
  if tmp then outputs.remove_tree(tmp) end
  tmp = nil
end }

return tests
