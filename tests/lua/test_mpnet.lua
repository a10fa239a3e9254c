-- MPNet against transformers on tiny random models it made (tests/ref/make_tiny_mpnet.py): sentence
-- embeddings (cosine >= 0.99999), the classification head's logits (within 1e-4), every parameter's
-- gradient of a loss (relative error <= 1e-3; the relative-position bias table's included); the
-- checkpoints' names both ways; the tokenizer (WordPiece, <s> ... </s></s> ... </s>); LoRA on the
-- family's q and v; the plan's parameter count; checkpointing's gradients.
local T = require("trainer.core.tensor")
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local registry = require("trainer.models.registry")
local native = require("trainer.native")

local root = native.root()
local data = root .. "/tests/data"
local lib = dofile(root .. "/tests/lua/testlib.lua")
local rel_err = lib.rel_err

local quiet = lib.no_warning
local input_of = lib.golden_ids
local values = lib.golden_values

-- The attention key biases (zero in exact arithmetic) are compared within 1e-5 absolute.
local KEY_BIAS = { "attn%.k%.bias$" }

-- The embedding model's forward and every gradient against the golden, and the relative-
-- position bias table's gradient reaching most of its entries.
local function embedder_parity(m)
  local g = st.load(data .. "/golden_tiny_mpnet.safetensors")
  assert(lib.embedder_parity(m, g, KEY_BIAS) > 30)
  local nz, saw = 0, false
  for name in m:parameters() do
    if name:match("relative_attention_bias%.weight$") then
      saw = true
      for _, v in ipairs(values(g, "grad." .. name)) do if v ~= 0 then nz = nz + 1 end end
    end
  end
  assert(saw and nz > 40, "the bias table's gradient reaches only " .. nz .. " entries")
  g:close()
end

return {
  { "mpnet_embeddings_and_gradients_match_transformers", function()
    local m = trainer.load_model(data .. "/tiny_mpnet", { on_warning = quiet })
    assert(registry.of_model(m).name == "mpnet")
    assert(m.config.layer_norm_eps == 1e-5 and m.config.relative_attention_num_buckets == 32)
    assert(m.max_length == 78, "max_length " .. tostring(m.max_length))
    embedder_parity(m)
    m:free()
  end },

  { "mpnet_packed_and_padded_rows_agree", function()
    -- the padded batch's real rows (pack_rows, the default) and every row computed give the
    -- same embedding: the bias is by relative position, the same in both layouts
    local m = trainer.load_model(data .. "/tiny_mpnet", { on_warning = quiet })
    local g = st.load(data .. "/golden_tiny_mpnet.safetensors")
    local x = input_of(g)
    m:eval()
    local a = m:forward(x)
    m.pack_rows = false
    local b = m:forward(x)
    local r = rel_err(a:values(), b:values())
    assert(r <= 1e-6, "packed vs padded " .. r)
    a:free(); b:free(); lib.free_input(x); g:close(); m:free()
  end },

  { "mpnet_classifier_matches_transformers", function()
    local m = trainer.load_model(data .. "/tiny_mpnet_cls", { on_warning = quiet })
    assert(m.task == "classification" and m.num_labels == 3, m.task)
    local g = st.load(data .. "/golden_tiny_mpnet_cls.safetensors")
    lib.classifier_parity(m, g, KEY_BIAS)
    g:close()
    m:free()
  end },

  { "mpnet_saves_under_transformers_names", function()
    for _, name in ipairs({ "tiny_mpnet_cls", "tiny_mpnet" }) do lib.saves_transformers_names(data .. "/" .. name) end
  end },

  { "mpnet_loads_with_and_without_its_prefix", function()
    -- the classifier's encoder ("mpnet.") into an embedding model, and the embedder's tensors (no
    -- prefix) into a classifier, whose head alone is new
    local m = trainer.load_model(data .. "/tiny_mpnet_cls", { task = "embedding", on_warning = function() end })
    m:free()
    local warned = {}
    local c = trainer.load_model(data .. "/tiny_mpnet", { task = "classification", num_labels = 2,
      on_warning = function(w) warned[#warned + 1] = w end })
    local text = table.concat(warned, "\n")
    assert(text:find("classifier.out_proj.weight", 1, true) and text:find("4 weights", 1, true), text)
    c:free()
  end },

  { "mpnet_tokenizer_matches_transformers", function()
    local want, tok = lib.tokenizer_matches_golden(data .. "/tiny_mpnet", data .. "/golden_tiny_mpnet.safetensors",
      data .. "/golden_tiny_mpnet_texts.txt", 78)
    assert(want[1] == 0, "<s> first")
    -- a pair: <s> A </s></s> B </s>
    local p = tok:batch({ { "the cat", "a dog" } }, {})
    local v = p.input_ids:values()
    assert(v[1] == 0 and v[#v] == 2, table.concat(v, " "))
    local seps = 0
    for _, id in ipairs(v) do if id == 2 then seps = seps + 1 end end
    assert(seps == 3, table.concat(v, " "))
    for _, t in pairs(p) do if T.is_tensor(t) then t:free() end end
  end },

  { "mpnet_lora_targets_q_and_v", function()
    local lora = require("trainer.train.lora")
    local m = trainer.load_model(data .. "/tiny_mpnet", { on_warning = quiet })
    local names = lora.apply(m, { r = 2 })
    assert(#names == 4 and names[1] == "encoder.layer.0.attention.attn.q" and names[2] == "encoder.layer.0.attention.attn.v",
      table.concat(names, ","))
    m:train()
    local g = st.load(data .. "/golden_tiny_mpnet.safetensors")
    local x = input_of(g)
    local e = m:forward(x)
    local lw = g:tensor("loss_weight", { tag = "activations" })
    m:backward(lw)
    -- the frozen bias table gets no gradient; the adapters do
    for name, p in m:parameters() do
      if name:match("relative_attention_bias") then assert(not p.trainable and not p.grad, name) end
      if p.trainable then assert(p.grad, name .. " has no gradient") end
    end
    e:free(); lw:free(); lib.free_input(x); g:close(); m:free()
  end },

  { "mpnet_config_errors", function()
    local raw = require("trainer.core.json").read(data .. "/tiny_mpnet/config.json")
    raw.relative_attention_num_buckets = 16
    local ok, err = pcall(registry.config, raw, "x/config.json")
    assert(not ok and errors.message(err):find("buckets relative positions into 32", 1, true), errors.message(err))
    raw.relative_attention_num_buckets, raw.type_vocab_size = 32, 2
    ok, err = pcall(registry.config, raw, "x/config.json")
    assert(not ok and errors.message(err):find("no token type embeddings", 1, true), errors.message(err))
  end },

  { "mpnet_plan_counts_the_built_parameters", function()
    local json = require("trainer.core.json")
    for _, name in ipairs({ "tiny_mpnet", "tiny_mpnet_cls" }) do
      local raw = json.read(data .. "/" .. name .. "/config.json")
      local fam = registry.family("mpnet")
      local terms = fam.plan_terms(raw)
      local n = 0
      for _, p in ipairs(terms.embeddings) do n = n + p.n end
      for _, p in ipairs(terms.layer) do n = n + p.n * terms.layers end
      local m = trainer.load_model(data .. "/" .. name, { on_warning = quiet })
      if m.task == "classification" then for _, p in ipairs(terms.head(3)) do n = n + p.n end end
      local built = 0
      for pname, p in m:parameters() do
        if not pname:match("pooler") then built = built + p.value:numel() end
      end
      assert(n == built, ("%s: the plan counts %d parameters, the model has %d"):format(name, n, built))
      m:free()
    end
  end },

  { "mpnet_checkpointing_gives_the_same_gradients", function()
    local ckpt = require("trainer.train.grad_checkpoint")
    local grads = {}
    for run = 1, 2 do
      local m = trainer.load_model(data .. "/tiny_mpnet", { on_warning = quiet })
      if run == 2 then ckpt.apply(m, { segments = 2 }) end
      m:train()
      m.rng.step = 3
      local g = st.load(data .. "/golden_tiny_mpnet.safetensors")
      local x = input_of(g)
      local e = m:forward(x)
      local lw = g:tensor("loss_weight", { tag = "activations" })
      m:backward(lw)
      grads[run] = {}
      for name, p in m:parameters() do grads[run][name] = p.grad and p.grad:values() end
      e:free(); lw:free(); lib.free_input(x); g:close(); m:free()
    end
    for name, v in pairs(grads[1]) do
      local w = grads[2][name]
      assert(w, name)
      for i = 1, #v do assert(v[i] == w[i], ("%s[%d]: %.9g vs %.9g with checkpointing"):format(name, i, v[i], w[i])) end
    end
  end },
}
