-- The model registry and the family interface (trainer.models.registry): nothing outside
-- lua/trainer/models/ names a family; each model_type maps to its family and an unknown one
-- names its file and lists the supported ones; model.arch chooses the family of a preset and
-- must agree with a folder's model_type; each family's position rule, layers, PEFT targets and
-- plan terms agree with the model it builds.
local ffi = require("ffi")
local native = require("trainer.native")
local registry = require("trainer.models.registry")
local errors = require("trainer.core.errors")
local T = require("trainer.core.tensor")

local root = native.root()
local shape = { hidden_size = 32, num_hidden_layers = 3, num_attention_heads = 4, intermediate_size = 64,
                vocab_size = 60, max_position_embeddings = 64 }
-- the same shape in the config.json fields of a family that names them its own way
local own_shapes = {
  distilbert = { dim = 32, n_layers = 3, n_heads = 4, hidden_dim = 64, vocab_size = 60, max_position_embeddings = 64 },
}
local function shape_of(name) return own_shapes[name] or shape end

local function raises(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  assert(errors.is_user_error(err), "expected a user error, got: " .. tostring(err))
  return errors.message(err)
end

local function has(text, what) assert(text:find(what, 1, true), ("%q not in: %s"):format(what, text)) end

-- What names a family in code outside lua/trainer/models/: a family module or a field of one,
-- a family's class names, a registered model_type as a string, a family compared by name,
-- layers found by their class name. Comments count too (a pointer to one family's module is
-- one); prose naming an architecture ("BERT's attention block") and tokenizer.json's type
-- names (BertPreTokenizer, RobertaProcessing) do not.
local forbidden = {
  { "models[%./]bert", "the BERT family's module" },
  { "models[%./]roberta", "the RoBERTa family's module" },
  { "models[%./]distilbert", "the DistilBERT family's module" },
  { "%f[%w_]bert%.%a", "a field of the BERT family" },
  { "%f[%w_]roberta%.%a", "a field of the RoBERTa family" },
  { "Bert[ML][oa][dy]e[lr]", "a BERT class name" },
  { "family%s*[=~]=", "a family compared by name" },
  { "[=~]=%s*[\"']Layer[\"']", "layers found by their class name" },
  { "[=~]=%s*[\"']Encoder[\"']", "encoders found by their class name" },
  { "[=~]=%s*[\"']SequenceClassifier[\"']", "a model class found by its name" },
  { "[=~]=%s*[\"']SentenceEncoder[\"']", "a model class found by its name" },
  { "[=~]=%s*[\"']Bert%u%a*[\"']", "a family's module found by its class name" },
}
for _, t in ipairs(registry.model_types()) do
  forbidden[#forbidden + 1] = { "[\"']" .. t:gsub("%p", "%%%0") .. "[\"']", ("the model_type %q"):format(t) }
end

local function lua_files(dir)
  local out = {}
  local p = io.popen('find "' .. dir .. '" -name "*.lua" | sort')
  for f in p:lines() do out[#out + 1] = f end
  p:close()
  return out
end

return {
  { "no_family_is_named_outside_models", function()
    local files = lua_files(root .. "/lua/trainer")
    assert(#files > 50, "found only " .. #files .. " Lua files")
    local bad, scanned = {}, 0
    for _, path in ipairs(files) do
      if not path:find("/lua/trainer/models/", 1, true) then
        scanned = scanned + 1
        local n = 0
        for line in io.lines(path) do
          n = n + 1
          for _, f in ipairs(forbidden) do
            if line:find(f[1]) then
              bad[#bad + 1] = ("%s:%d: %s: %s"):format(path:sub(#root + 2), n, f[2], line:gsub("^%s+", ""))
            end
          end
        end
      end
    end
    assert(scanned > 40, "scanned only " .. scanned .. " files")
    assert(#bad == 0, "code outside lua/trainer/models/ names a family (ask trainer.models.registry):\n"
      .. table.concat(bad, "\n"))
  end },

  { "the_check_catches_a_family_name", function()
    -- the patterns above find what they are for (a test that could not fail proves nothing)
    for _, line in ipairs({ 'local bert = require("trainer.models.bert")', "x = bert.config(raw)",
        'if m:type() == "Layer" then', 'if mod.__name == "BertAttention" then', 'if m:type() == "BertEncoder" then', 'if cfg.family == "roberta" then',
        'arch = "xlm-roberta"', "local roberta = require('trainer.models.roberta')", 'x = roberta.position_ids',
        'BertModel.new(cfg)', 'BertLayer', 'model_type = "camembert"' }) do
      local hit = false
      for _, f in ipairs(forbidden) do if line:find(f[1]) then hit = true end end
      assert(hit, "not caught: " .. line)
    end
    for _, line in ipairs({ '"sentence_bert_config.json"', "-- BERT's attention block", 'config = "bert-base"',
        'local Layer = Module:extend("Layer")', 'if pp.type == "RobertaProcessing" then', '"BertPreTokenizer"',
        "-- RoBERTa's <s> and </s>" }) do
      for _, f in ipairs(forbidden) do assert(not line:find(f[1]), "caught wrongly by " .. f[1] .. ": " .. line) end
    end
  end },

  { "model_types_map_to_families", function()
    local types = registry.model_types()
    assert(table.concat(types, ",") == "bert,roberta,xlm-roberta,camembert,distilbert,mpnet,modernbert", table.concat(types, ","))
    local bert, roberta = require("trainer.models.bert"), require("trainer.models.roberta")
    assert(registry.family("bert") == bert and bert.name == "bert")
    for _, t in ipairs({ "roberta", "xlm-roberta", "camembert" }) do
      assert(registry.family(t) == roberta, t .. " is not built by the RoBERTa family")
    end
    local fams = registry.families()
    assert(#fams == 5 and fams[1] == bert and fams[2] == roberta, "families: " .. #fams)
    assert(registry.family("distilbert") == require("trainer.models.distilbert") and fams[3].name == "distilbert")
    assert(registry.family("mpnet") == require("trainer.models.mpnet") and fams[4].name == "mpnet")
    assert(registry.family("modernbert") == fams[5] and fams[5].name == "modernbert")
    assert(table.concat(registry.model_types_of(roberta), ",") == "roberta,xlm-roberta,camembert")
    -- the recipe key model.arch takes exactly the registry's model_types
    local keys_text = io.open(root .. "/lua/trainer/recipe/keys.lua"):read("*a")
    has(keys_text, 'enum = require("trainer.models.registry").model_types()')
  end },

  { "unknown_model_type_names_the_file_and_the_supported", function()
    local raw = {}
    for k, v in pairs(shape) do raw[k] = v end
    raw.model_type = "gpt2"
    local msg = raises(registry.config, raw, "models/x/config.json")
    has(msg, "models/x/config.json")
    has(msg, 'model_type "gpt2" is not supported (bert, roberta, xlm-roberta, camembert, distilbert, mpnet, modernbert)')
    msg = raises(registry.config, shape, "model.config", "gpt2")
    has(msg, "model.arch")
    has(msg, '"gpt2"')
  end },

  { "arch_chooses_the_family_of_a_preset", function()
    local cfg, fam = registry.config(shape, "model.config", "roberta")
    assert(fam.name == "roberta" and cfg.family == "roberta" and cfg.model_type == "roberta", cfg.family)
    assert(shape.model_type == nil, "the caller's table was changed")
    assert(fam.max_positions(cfg) == 64 - cfg.pad_token_id - 1, "roberta's positions")
    cfg, fam = registry.config(shape, "model.config", "xlm-roberta")
    assert(fam.name == "roberta" and cfg.model_type == "xlm-roberta")
    cfg, fam = registry.config(shape, "model.config")
    assert(fam.name == "bert" and cfg.model_type == "bert" and fam.max_positions(cfg) == 64)
    -- a classifier built by the family carries its weight prefix (transformers' base_model_prefix)
    cfg, fam = registry.config(shape, "model.config", "roberta")
    local m = fam.build("classification", { config = cfg, seed = 1, num_labels = 2 })
    assert(m:parameter_map()["roberta.embeddings.word_embeddings.weight"], "no roberta.* names")
    assert(m.task == "classification" and registry.of_model(m) == fam)
    m:free()
  end },

  { "a_folder_decides_and_a_different_arch_is_an_error", function()
    local models = require("trainer.models")
    local dir = root .. "/tests/data/tiny_bert"
    local cfg, fam = models.config_of({ from = dir })
    assert(fam.name == "bert" and cfg.hidden_size == 32)
    cfg, fam = models.config_of({ from = dir, arch = "bert" })
    assert(fam.name == "bert" and cfg.model_type == "bert")
    local msg = raises(models.config_of, { from = dir, arch = "roberta" })
    has(msg, dir .. "/config.json")
    has(msg, 'model_type "bert"')
    has(msg, 'model.arch is "roberta"')
    -- model.config's own model_type must agree with model.arch too
    local raw = { model_type = "roberta" }
    for k, v in pairs(shape) do raw[k] = v end
    msg = raises(models.config_of, { arch = "bert", config = raw })
    has(msg, "model.config")
    -- the same family under another model_type is the same architecture
    cfg, fam = models.config_of({ arch = "xlm-roberta", config = raw })
    assert(fam.name == "roberta" and cfg.model_type == "roberta")
  end },

  { "position_ids_one_rule_for_host_arrays_and_lists", function()
    local ids = { { 0, 5, 6, 2, 1, 1 }, { 0, 7, 2, 1, 1, 1 } }
    local B, L = 2, 6
    for _, arch in ipairs({ "bert", "roberta" }) do
      local raw = { pad_token_id = 1 }
      for k, v in pairs(shape) do raw[k] = v end
      local cfg, fam = registry.config(raw, "test", arch)
      local list, arr = {}, ffi.new("int32_t[?]", B * L)
      for b = 1, B do for t = 1, L do list[(b - 1) * L + t] = ids[b][t]; arr[(b - 1) * L + t - 1] = ids[b][t] end end
      local reads = 0
      local pos1, pos0 = {}, ffi.new("int32_t[?]", B * L)
      fam.position_ids(cfg, function() reads = reads + 1 return list end, pos1, B, L, 1)
      fam.position_ids(cfg, function() reads = reads + 1 return arr end, pos0, B, L, 0)
      for i = 0, B * L - 1 do assert(pos1[i + 1] == pos0[i], ("%s: position %d differs"):format(arch, i)) end
      local want = arch == "bert" and "0,1,2,3,4,5" or "2,3,4,5,1,1"
      assert(table.concat(pos1, ",", 1, L) == want, arch .. ": " .. table.concat(pos1, ",", 1, L))
      -- BERT's rule never reads the ids (a device batch would be read back)
      assert(reads == (arch == "bert" and 0 or 2), arch .. ": the ids were read " .. reads .. " times")
      -- and the model's own positions are the rule's
      local t = T.from_table(ids, { dtype = "i32" })
      local x, owned = require("trainer.models.bert").prepare_inputs(cfg, { input_ids = t }, "cpu")
      local p = x.position_ids:values()
      for i = 1, B * L do assert(p[i] == pos1[i], arch .. ": prepare_inputs differs at " .. i) end
      for _, o in ipairs(owned) do o:free() end
      t:free()
    end
  end },

  { "layers_and_stacks_survive_checkpointing", function()
    local checkpoint = require("trainer.train.grad_checkpoint")
    for _, fam in ipairs(registry.families()) do
      local cfg = fam.config(shape_of(fam.name), "test")
      local m = fam.build("embedding", { config = cfg, seed = 2 })
      assert(#fam.layer_stacks(m) == 1, fam.name .. ": one layer stack")
      local plain = fam.layers(m)
      assert(#plain == shape.num_hidden_layers, fam.name .. ": " .. #plain .. " layers")
      checkpoint.apply(m, { segments = 2 })
      local after = fam.layers(m)
      assert(#after == #plain, fam.name .. ": layers inside segments are found")
      for i = 1, #plain do assert(after[i] == plain[i], fam.name .. ": layer order") end
      assert(#fam.layer_stacks(m)[1].layers == 2, fam.name .. ": the stack holds the segments")
      m:free()
    end
  end },

  { "peft_targets_adapt_every_layer", function()
    local lora = require("trainer.train.lora")
    for _, fam in ipairs(registry.families()) do
      assert(type(fam.peft_targets) == "table" and #fam.peft_targets > 0, fam.name .. ": no peft_targets")
      local m = fam.build("embedding", { config = fam.config(shape_of(fam.name), "test"), seed = 3 })
      local names = lora.apply(m, { r = 2, targets = fam.peft_targets })
      assert(#names == #fam.peft_targets * shape.num_hidden_layers, fam.name .. ": adapted " .. #names)
      m:free()
    end
  end },

  { "plan_terms_count_what_the_family_builds", function()
    local plan = require("trainer.plan")
    for _, arch in ipairs(registry.model_types()) do
      for _, task in ipairs({ "embedding", "classification" }) do
        local cfg, fam = registry.config(shape_of(arch), "test", arch)
        local m = fam.build(task, { config = cfg, seed = 4, num_labels = 5, pooler = false })
        local n = 0
        for _, p in m:parameters() do n = n + p.value:numel() end
        m:free()
        local p = plan.estimate({ model = { arch = arch, config = shape_of(arch), task = task, num_labels = 5 },
          device = "cpu" },
          { cpu_gemm = "openblas" })
        assert(p.parameters == n, ("%s %s: the plan counts %d parameters, the model has %d"):format(arch, task,
          p.parameters, n))
      end
    end
  end },
}
