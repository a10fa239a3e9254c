-- MPNet against transformers on tiny random models it made (tests/ref/make_tiny_mpnet.py): sentence
-- embeddings (cosine >= 0.99999), the classification head's logits (within 1e-4), every parameter's
-- gradient of a loss (relative error <= 1e-3; the relative-position bias table's included); the
-- checkpoints' names both ways; the tokenizer (WordPiece, <s> ... </s></s> ... </s>); LoRA on the
-- family's q and v; the plan's parameter count; checkpointing's gradients.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local registry = require("trainer.models.registry")
local native = require("trainer.native")

local root = native.root()
local data = root .. "/tests/data"
local lib = dofile(root .. "/tests/lua/testlib.lua")
local rel_err = lib.rel_err

local function quiet(w) error("unexpected warning: " .. w) end

local function input_of(g)
  return { input_ids = g:tensor("input_ids", { tag = "activations" }),
           attention_mask = g:tensor("attention_mask", { tag = "activations" }) }
end

local function values(g, name)
  local t = g:tensor(name)
  local v = t:values()
  t:free()
  return v
end

-- Every parameter's gradient against grad.<name>; the attention key biases (zero in exact
-- arithmetic) within 1e-5 absolute. Returns the number of parameters.
local function check_grads(model, g)
  local n, saw_bias = 0, false
  for name, p in model:parameters() do
    n = n + 1
    local r = values(g, "grad." .. name)
    local v = p.grad and p.grad:values()
    if not v then v = {} for i = 1, #r do v[i] = 0 end end
    if name:match("attn%.k%.bias$") then
      for i = 1, #r do assert(math.abs(v[i] - r[i]) <= 1e-5, ("%s[%d]: %g vs %g"):format(name, i, v[i], r[i])) end
    else
      local rel = rel_err(v, r)
      assert(rel <= 1e-3, ("%s: gradient relative error %g > 1e-3"):format(name, rel))
    end
    if name:match("relative_attention_bias%.weight$") then
      saw_bias = true
      local nz = 0
      for i = 1, #r do if r[i] ~= 0 then nz = nz + 1 end end
      assert(nz > 40, "the bias table's gradient reaches only " .. nz .. " entries")
    end
  end
  assert(saw_bias and n > 30, "parameters: " .. n)
  return n
end

local function cosine_rows(a, b, rows, cols)
  local worst = 1
  for r = 0, rows - 1 do
    local dot, na, nb = 0, 0, 0
    for c = 1, cols do
      local x, y = a[r * cols + c], b[r * cols + c]
      dot, na, nb = dot + x * y, na + x * x, nb + y * y
    end
    worst = math.min(worst, dot / math.sqrt(na * nb))
  end
  return worst
end

-- The embedding model's forward and backward against the golden; returns the embedding's
-- relative error.
local function embedder_parity(m)
  local g = st.load(data .. "/golden_tiny_mpnet.safetensors")
  local x = input_of(g)
  m:eval():set_grad_enabled(true)
  local e = m:forward(x)
  local want, got = values(g, "embedding"), e:values()
  local cos = cosine_rows(got, want, 4, 32)
  assert(cos >= 0.99999, "cosine " .. cos)
  local rel = rel_err(got, want)
  assert(rel <= 1e-5, "embedding relative error " .. rel)
  -- loss = sum(embedding * loss_weight): its gradient is loss_weight
  local lw = g:tensor("loss_weight", { tag = "activations" })
  m:backward(lw)
  check_grads(m, g)
  e:free(); lw:free()
  lib.free_input(x)
  g:close()
  return rel
end

local function names_of(model)
  local out = {}
  for i, e in ipairs(registry.of_model(model).state_list(model)) do out[i] = e[1] end
  return out
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
    local x = input_of(g)
    m:eval():set_grad_enabled(true)
    local logits = m:forward(x)
    local want, got = values(g, "logits"), logits:values()
    for i = 1, #want do
      assert(math.abs(got[i] - want[i]) <= 1e-4, ("logits[%d]: %.7g vs %.7g"):format(i, got[i], want[i]))
    end
    local labels = g:tensor("labels", { tag = "activations" })
    local loss, lse = ops.cross_entropy(logits, labels)
    assert(math.abs(loss:values()[1] - values(g, "loss")[1]) <= 1e-5, "loss")
    local dl = ops.cross_entropy_backward(logits, lse, labels)
    m:backward(dl)
    check_grads(m, g)
    for _, t in ipairs({ logits, labels, loss, lse, dl }) do t:free() end
    lib.free_input(x)
    g:close()
    m:free()
  end },

  { "mpnet_saves_under_transformers_names", function()
    for _, name in ipairs({ "tiny_mpnet_cls", "tiny_mpnet" }) do
      local m = trainer.load_model(data .. "/" .. name, { on_warning = quiet })
      local r = st.load(data .. "/" .. name .. "/model.safetensors")
      local ours = names_of(m)
      local theirs = {}
      for _, n in ipairs(r:names()) do theirs[n] = true end
      for _, n in ipairs(ours) do assert(theirs[n], name .. ": saves " .. n .. ", which transformers does not have") end
      local count = 0
      for _ in pairs(theirs) do count = count + 1 end
      assert(count == #ours, ("%s: %d names, transformers %d"):format(name, #ours, count))
      assert(registry.of_model(m).has_head(r) == (m.task == "classification"), name)
      r:close()
      m:free()
    end
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
    local tok = require("trainer.core.tokenizer").load(data .. "/tiny_mpnet")
    local g = st.load(data .. "/golden_tiny_mpnet.safetensors")
    local ids, mask = g:tensor("input_ids"), g:tensor("attention_mask")
    local texts = {}
    for line in io.lines(data .. "/golden_tiny_mpnet_texts.txt") do texts[#texts + 1] = line end
    local b = tok:batch(texts, { max_length = 78 })
    local want, wm, got = ids:values(), mask:values(), b.input_ids:values()
    assert(b.input_ids:shape()[2] == ids:shape()[2], "padded length")
    for i = 1, #want do
      if wm[i] ~= 0 then assert(got[i] == want[i], ("token %d: %d vs %d"):format(i, got[i], want[i])) end
    end
    assert(want[1] == 0, "<s> first")
    -- a pair: <s> A </s></s> B </s>
    local p = tok:batch({ { "the cat", "a dog" } }, {})
    local v = p.input_ids:values()
    assert(v[1] == 0 and v[#v] == 2, table.concat(v, " "))
    local seps = 0
    for _, id in ipairs(v) do if id == 2 then seps = seps + 1 end end
    assert(seps == 3, table.concat(v, " "))
    for _, t in pairs(b) do if T.is_tensor(t) then t:free() end end
    for _, t in pairs(p) do if T.is_tensor(t) then t:free() end end
    ids:free(); mask:free(); g:close()
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
