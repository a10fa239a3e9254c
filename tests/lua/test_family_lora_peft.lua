-- PEFT's LoRA adapters on the tiny DistilBERT, MPNet and ModernBERT models (made by
-- tests/ref/make_tiny_families.py and tests/ref/make_family_lora.py) loaded by trainer.lora: the
-- sentence embedding (relative error <= 1e-5) and every adapter tensor's gradient of the golden's
-- loss (relative error <= 1e-3), as PEFT computes them; and the adapter saved again by
-- trainer.lora.save keeps PEFT's key names, configuration and values.
local st = require("trainer.core.safetensors")
local json = require("trainer.core.json")
local lora = require("trainer.train.lora")
local native = require("trainer.native")

local root = native.root()
local data = root .. "/tests/data"
local lib = dofile(root .. "/tests/lua/testlib.lua")

local quiet = lib.no_warning

-- folder, the first adapted layer's name, how many adapted layers, PEFT's target_modules
local FAMILIES = {
  { "tiny_distilbert", "transformer.layer.0.attention.q_lin", 4, { "q_lin", "v_lin" } },
  { "tiny_mpnet", "encoder.layer.0.attention.attn.q", 8, { "k", "o", "q", "v" } },
  { "tiny_modernbert", "layers.0.attn.Wqkv", 8, { "Wi", "Wo", "Wqkv" } },
}

local function adapter_keys(path)
  local f = st.load(path)
  local keys = {}
  for _, name in ipairs(f:names()) do keys[#keys + 1] = name end
  f:close()
  table.sort(keys)
  return keys
end

local cases = {}
for _, fam in ipairs(FAMILIES) do
  local folder, first, layers, targets = fam[1], fam[2], fam[3], fam[4]

  cases[#cases + 1] = { folder .. "_lora_matches_peft", function()
    local m = trainer.load_model(data .. "/" .. folder, { on_warning = quiet })
    local names = lora.load(m, data .. "/" .. folder .. "_lora")
    assert(#names == layers and names[1] == first, table.concat(names, ","))
    local g = st.load(data .. "/golden_" .. folder .. ".safetensors")
    local gl = st.load(data .. "/golden_" .. folder .. "_lora.safetensors")
    local x = lib.golden_ids(g)
    m:eval():set_grad_enabled(true)
    local e = m:forward(x)
    local rel = lib.rel_err(e:values(), lib.golden_values(gl, "embedding"))
    assert(rel <= 1e-5, "embedding relative error " .. rel)
    local lw = g:tensor("loss_weight", { tag = "activations" })
    m:backward(lw)
    local n = 0
    for name, p in m:parameters() do
      if p.trainable then
        n = n + 1
        local r = lib.rel_err(p.grad:values(), lib.golden_values(gl, "grad." .. name))
        assert(r <= 1e-3, ("%s: gradient relative error %g"):format(name, r))
      end
    end
    assert(n == 2 * layers, n .. " trainable tensors")
    e:free(); lw:free(); lib.free_input(x); g:close(); gl:close()
    m:free()
  end }

  cases[#cases + 1] = { folder .. "_lora_saves_peft_names", function()
    local m = trainer.load_model(data .. "/" .. folder, { on_warning = quiet })
    local src = data .. "/" .. folder .. "_lora"
    lora.load(m, src)
    local dir = lib.tmpdir() .. "/adapter"
    lora.save(m, dir, nil, "tests/data/" .. folder)
    m:free()
    local want, got = adapter_keys(src .. "/adapter_model.safetensors"),
      adapter_keys(dir .. "/adapter_model.safetensors")
    assert(table.concat(got, ",") == table.concat(want, ","),
      "saved keys " .. table.concat(got, ",") .. " differ from PEFT's " .. table.concat(want, ","))
    local c = json.read(dir .. "/adapter_config.json")
    local tm = {}
    for i, t in ipairs(c.target_modules) do tm[i] = t end
    table.sort(tm)
    assert(table.concat(tm, ",") == table.concat(targets, ","), table.concat(tm, ","))
    assert(c.r == 4 and c.lora_alpha == 8 and c.peft_type == "LORA", json.encode(c))
    local a, b = st.load(src .. "/adapter_model.safetensors"), st.load(dir .. "/adapter_model.safetensors")
    for _, key in ipairs(want) do
      local va, vb = lib.golden_values(a, key), lib.golden_values(b, key)
      assert(#va == #vb, key)
      for i = 1, #va do assert(va[i] == vb[i], ("%s[%d]: %g ~= %g"):format(key, i, vb[i], va[i])) end
    end
    a:close(); b:close()
  end }
end
return cases
