-- DistilBERT and the first-token classification heads (RoBERTa's, DistilBERT's) against
-- transformers on tiny random models it made (tests/ref/make_tiny_families.py): sentence
-- embeddings (cosine >= 0.99999), logits (within 1e-4), and every parameter's gradient of a
-- loss (relative error <= 1e-3); the checkpoints saved under transformers' names; the config's
-- own field names in its errors; the tokenizer's specials.
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local registry = require("trainer.models.registry")
local native = require("trainer.native")
local sys = require("trainer.core.sys")

local root = native.root()
local data = root .. "/tests/data"
local lib = dofile(root .. "/tests/lua/testlib.lua")

local quiet = lib.no_warning

-- The attention key biases (zero in exact arithmetic) are compared within 1e-5 absolute.
local KEY_BIAS = { "k_lin%.bias$", "self%.key%.bias$" }

-- The classifier folder's golden: logits within 1e-4, the loss, every gradient.
local function classifier_parity(name)
  local m = trainer.load_model(data .. "/" .. name, { on_warning = quiet })
  assert(m.task == "classification" and m.num_labels == 3, m.task)
  local g = st.load(data .. "/golden_" .. name .. ".safetensors")
  assert(lib.classifier_parity(m, g, KEY_BIAS) > 20)
  g:close()
  return m
end

return {
  { "distilbert_embeddings_and_gradients_match_transformers", function()
    local m = trainer.load_model(data .. "/tiny_distilbert", { on_warning = quiet })
    assert(registry.of_model(m).name == "distilbert")
    assert(m.config.sinusoidal_pos_embds == true and m.config.dim == 32)
    local g = st.load(data .. "/golden_tiny_distilbert.safetensors")
    assert(lib.embedder_parity(m, g, KEY_BIAS) > 20)
    g:close()
    m:free()
  end },

  { "distilbert_sinusoidal_table_is_transformers", function()
    -- a model built from the config (random init) starts from the table the folder holds
    local path = data .. "/tiny_distilbert/config.json"
    local cfg, fam = registry.config(require("trainer.core.json").read(path), path)
    local m = fam.build("embedding", { config = cfg, seed = 3 })
    local r = st.load(data .. "/tiny_distilbert/model.safetensors")
    local want = r:tensor("embeddings.position_embeddings.weight")
    local w = want:values()
    local got = m:parameter_map()["embeddings.position_embeddings.weight"].value:values()
    for i = 1, #w do assert(math.abs(got[i] - w[i]) <= 1e-7, ("row-major %d: %.9g vs %.9g"):format(i, got[i], w[i])) end
    want:free(); r:close(); m:free()
  end },

  { "distilbert_sinusoidal_table_missing_from_a_checkpoint", function()
    -- a checkpoint without the table: the computed one, said in a warning
    local dir = lib.tmpdir() .. "/nopos"
    assert(sys.mkdir_p(dir))
    for _, f in ipairs({ "config.json", "tokenizer.json", "vocab.txt" }) do
      assert(sys.write_file(dir .. "/" .. f, lib.read(data .. "/tiny_distilbert/" .. f)))
    end
    local r = st.load(data .. "/tiny_distilbert/model.safetensors")
    local list, want = {}, nil
    for _, n in ipairs(r:names()) do
      local t = r:tensor(n)
      if n == "embeddings.position_embeddings.weight" then want = t:values(); t:free()
      else list[#list + 1] = { n, t } end
    end
    r:close()
    st.save(dir .. "/model.safetensors", list)
    for _, e in ipairs(list) do e[2]:free() end
    local warned = {}
    local m = trainer.load_model(dir, { on_warning = function(w) warned[#warned + 1] = w end })
    assert(#warned == 1 and warned[1]:find("position_embeddings", 1, true), table.concat(warned, "\n"))
    local got = m:parameter_map()["embeddings.position_embeddings.weight"].value:values()
    for i = 1, #want do assert(math.abs(got[i] - want[i]) <= 1e-7, i) end
    m:free()
  end },

  { "distilbert_classifier_matches_transformers", function()
    local m = classifier_parity("tiny_distilbert_cls")
    assert(m.config.activation == "relu")
    m:free()
  end },

  { "roberta_classifier_matches_transformers", function()
    local m = classifier_parity("tiny_roberta_cls")
    m:free()
  end },

  { "heads_save_under_transformers_names", function()
    for _, name in ipairs({ "tiny_distilbert_cls", "tiny_roberta_cls", "tiny_distilbert" }) do
      lib.saves_transformers_names(data .. "/" .. name)
    end
  end },

  { "a_base_checkpoint_gets_a_new_head", function()
    -- the embedder folder as a classifier: only the head is new (transformers' warning)
    local warned = {}
    local m = trainer.load_model(data .. "/tiny_distilbert", { task = "classification", num_labels = 2,
      on_warning = function(w) warned[#warned + 1] = w end })
    assert(#warned == 1 and warned[1]:find("pre_classifier.weight", 1, true) and warned[1]:find("4 weights", 1, true),
      table.concat(warned, "\n"))
    m:free()
  end },

  { "distilbert_config_errors_name_its_fields", function()
    local raw = require("trainer.core.json").read(data .. "/tiny_distilbert/config.json")
    raw.dim = nil
    local ok, err = pcall(registry.config, raw, "x/config.json")
    assert(not ok)
    local msg = errors.message(err)
    assert(msg:find("x/config.json: dim is missing; a DistilBERT config.json", 1, true), msg)
    assert(not msg:find("hidden_size", 1, true), msg)
    raw.dim, raw.activation = 32, "swish"
    ok, err = pcall(registry.config, raw, "x/config.json")
    assert(not ok and errors.message(err):find("activation \"swish\" is not supported (gelu, relu)", 1, true))
    raw.activation, raw.sinusoidal_pos_embds = "gelu", "yes"
    ok, err = pcall(registry.config, raw, "x/config.json")
    assert(not ok and errors.message(err):find("sinusoidal_pos_embds is \"yes\", but it must be true or false", 1, true))
  end },

  { "lora_targets_default_to_the_family", function()
    local lora = require("trainer.train.lora")
    local json = require("trainer.core.json")
    local dir = lib.tmpdir()
    for _, case in ipairs({ { "tiny_distilbert", "transformer.layer.1.attention.v_lin", "q_lin" },
                            { "tiny_roberta_cls", "roberta.encoder.layer.1.attention.self.value", "query" } }) do
      local m = trainer.load_model(data .. "/" .. case[1], { on_warning = quiet })
      local names = lora.apply(m, { r = 2 })
      assert(#names == 4 and names[4] == case[2], table.concat(names, ","))
      lora.save(m, dir .. "/" .. case[1])
      local c = json.read(dir .. "/" .. case[1] .. "/adapter_config.json")
      assert(c.target_modules[1] == case[3] and #c.target_modules == 2, case[1])
      m:free()
    end
    -- BERT's names on DistilBERT: the error names the family's own
    local m = trainer.load_model(data .. "/tiny_distilbert", { on_warning = quiet })
    local ok, err = pcall(lora.apply, m, { targets = { "query" } })
    assert(not ok and errors.message(err):find("PEFT's defaults for distilbert models are q_lin, v_lin", 1, true),
      errors.message(err))
    m:free()
  end },

  { "distilbert_dropout_sites", function()
    -- no dropout after out_lin; model.dropout sets every other site (embeddings, attention
    -- probabilities, the feed-forward's output, the head's)
    local m = trainer.load_model(data .. "/tiny_distilbert_cls", { on_warning = quiet })
    local fam = registry.of_model(m)
    fam.set_dropout(m, 0.3)
    local seen = { attn = 0, zero = 0, set = 0 }
    for _, mod in m:named_modules() do
      if mod.__name == "BertAttention" then
        seen.attn = seen.attn + 1
        assert(mod.attn_p == 0.3 and mod.dropout.p == 0, "attention: probabilities 0.3, out_lin's output none")
        seen.zero = seen.zero + 1
      elseif mod.__name == "Dropout" and mod.p == 0.3 then seen.set = seen.set + 1 end
    end
    -- embeddings + 2 feed-forwards + the head
    assert(seen.attn == 2 and seen.set == 4, ("%d attention blocks, %d dropouts at 0.3"):format(seen.attn, seen.set))
    m:free()
  end },

  { "distilbert_tokenizer_specials", function()
    local want = lib.tokenizer_matches_golden(data .. "/tiny_distilbert", data .. "/golden_tiny_distilbert.safetensors",
      data .. "/golden_tiny_bert_texts.txt", 64)
    assert(want[1] == 2, "[CLS] first")
  end },
}
