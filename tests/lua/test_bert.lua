-- The BERT modules against PyTorch on the tiny goldens (tests/ref/README.md): hidden
-- states, embeddings, logits, loss and EVERY parameter gradient computed by the modules'
-- backward; activation memory returning to its start after backward; eval mode keeping
-- nothing; frozen parameters getting no grad buffer; dropout replayed from the keyed RNG;
-- loading errors naming the file.
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local st = require("trainer.core.safetensors")
local memory = require("trainer.core.memory")
local errors = require("trainer.core.errors")
local models = require("trainer.models")
local bert = require("trainer.models.bert")
local native = require("trainer.native")

local root = native.root()
local data = root .. "/tests/data"
local lib = dofile(root .. "/tests/lua/testlib.lua")
local rel_err, golden_input, free_input = lib.rel_err, lib.golden_input, lib.free_input

-- Every parameter's gradient against the golden's grad.<name> (testlib's check_grads:
-- relative error <= 1e-3, or |g| <= 1e-5 for the attention key biases, zero in exact
-- arithmetic); the model has `want` parameters.
local function check_grads(model, g, want)
  local n = lib.check_grads(model, g, { "attention%.self%.key%.bias$" })
  assert(n == want, ("%d parameters, got %d"):format(want, n))
end

local function tiny_embedder()
  local m = trainer.load_model(data .. "/tiny_bert", { on_warning = lib.no_warning })
  return m
end

-- The tiny embedder in train mode, its dropout keyed by (seed, step); the tiny golden file
-- and its input.
local function training_on_golden(seed, step)
  local m = tiny_embedder()
  m:train()
  m.rng.seed, m.rng.step = seed, step
  local g = st.load(data .. "/golden_tiny_bert.safetensors")
  return m, g, golden_input(g)
end

return {
  { "tiny_hidden_embedding_and_every_gradient", function()
    local m = tiny_embedder()
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local x = golden_input(g)
    -- last_hidden_state from the encoder alone, without keeping anything
    m:eval()
    local h = m.bert:forward(x)
    local ref = g:tensor("last_hidden_state")
    local _, abs = rel_err(h:values(), ref:values())
    assert(abs <= 1e-4, ("last_hidden_state max abs error %g"):format(abs))
    h:free(); ref:free()
    -- embedding + loss = sum(embedding * loss_weight) and every gradient (eval mode with grad)
    m:set_grad_enabled(true)
    local a0 = memory.stats().by_tag.activations
    local e = m:forward(x)
    local eref = g:tensor("embedding")
    _, abs = rel_err(e:values(), eref:values())
    assert(abs <= 1e-5, ("embedding max abs error %g"):format(abs))
    local w = g:tensor("loss_weight", { tag = "activations" })
    local prod = ops.mul(e, w)
    local loss = ops.sum(prod)
    local lref = g:tensor("loss")
    assert(math.abs(loss:item() - lref:item()) <= 1e-5 * math.max(1, math.abs(lref:item())), "loss")
    m:backward(w)
    e:free(); prod:free(); loss:free(); w:free(); eref:free(); lref:free()
    assert(memory.stats().by_tag.activations == a0, ("activations after backward: %d bytes, not %d"):format(
      memory.stats().by_tag.activations, a0))
    check_grads(m, g, 39)
    free_input(x)
    g:close()
    m:free()
  end },

  { "tiny_classifier_logits_loss_and_every_gradient", function()
    local m = trainer.load_model(data .. "/tiny_bert_cls", { on_warning = lib.no_warning })
    assert(m.task == "classification" and m.labels[0] == "entailment" and m.labels[2] == "contradiction")
    local g = st.load(data .. "/golden_tiny_bert_cls.safetensors")
    local logits, x, a0 = lib.golden_forward(m, g)
    lib.classifier_loss_backward(m, g, logits, a0, 1e-5)
    check_grads(m, g, 41)
    free_input(x)
    g:close()
    m:free()
  end },

  { "parameter_names_are_hf_state_dict_names", function()
    local m = trainer.load_model(data .. "/tiny_bert_cls")
    local names = {}
    for name in m:parameters() do names[#names + 1] = name end
    assert(names[1] == "bert.embeddings.word_embeddings.weight", names[1])
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    for _, n in ipairs({ "bert.encoder.layer.1.attention.self.query.weight", "bert.encoder.layer.0.attention.output.LayerNorm.bias",
      "bert.encoder.layer.0.intermediate.dense.weight", "bert.encoder.layer.1.output.dense.bias",
      "bert.pooler.dense.weight", "classifier.weight", "classifier.bias" }) do
      assert(set[n], "missing " .. n)
    end
    -- named_modules: LoRA targets match by suffix
    local q = 0
    for name, mod in m:named_modules() do
      if name:match("%.query$") then q = q + 1; assert(mod:type() == "Linear") end
    end
    assert(q == 2, "two query Linears")
    m:free()
  end },

  { "eval_forward_keeps_nothing", function()
    local m = tiny_embedder()
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local x = golden_input(g)
    m:eval()
    local a0 = memory.stats().by_tag.activations
    local e = m:forward(x)
    assert(memory.stats().by_tag.activations == a0 + e:nbytes(), "eval forward kept activations")
    e:free()
    for name, mod in m:named_modules() do assert(next(mod.saved) == nil, "saved state in " .. name) end
    local dy = T.ones({ 4, 32 })
    local ok, err = pcall(m.backward, m, dy)
    assert(not ok and tostring(errors.message(err)):find("nothing saved", 1, true), tostring(errors.message(err)))
    dy:free()
    assert(memory.stats().by_tag.activations == a0, "activations left")
    free_input(x)
    g:close()
    m:free()
  end },

  { "frozen_parameters_get_no_grad_buffer", function()
    local m = tiny_embedder()
    m:train()
    m.bert.embeddings:set_trainable(false)
    m.bert.encoder.layers[1]:set_trainable(false)
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local x = golden_input(g)
    local g0 = memory.stats().by_tag.grads
    local a0 = memory.stats().by_tag.activations
    local e = m:forward(x)
    m:backward(e)
    e:free()
    assert(memory.stats().by_tag.activations == a0, "activations left")
    local with, without = 0, 0
    for name, p in m:parameters() do
      if name:match("^embeddings") or name:match("^encoder%.layer%.0%.") then
        assert(p.grad == nil, name .. " is frozen but has a grad")
        without = without + 1
      elseif not name:match("^pooler") then
        assert(p.grad ~= nil, name .. " is trainable but has no grad")
        with = with + 1
      end
    end
    assert(without == 21 and with == 16, ("%d frozen, %d trained"):format(without, with))
    local bytes = 0
    for _, p in m:parameters() do if p.grad then bytes = bytes + p.grad:nbytes() end end
    assert(memory.stats().by_tag.grads - g0 >= bytes, "grads tag counts the buffers")
    free_input(x)
    g:close()
    m:free()
  end },

  { "dropout_replays_from_the_keyed_rng", function()
    local m, g, x = training_on_golden(7, 3)
    local e1 = m:forward(x)
    m:clear_saved()
    local e2 = m:forward(x)
    local _, same = rel_err(e1:values(), e2:values())
    assert(same == 0, "same (seed, step): identical output")
    m:clear_saved()
    m.rng.step = 4
    local e3 = m:forward(x)
    local _, diff = rel_err(e1:values(), e3:values())
    assert(diff > 1e-4, "another step draws other masks")
    m:clear_saved()
    m:eval()
    local e4 = m:forward(x)
    local ref = g:tensor("embedding")
    local _, abs = rel_err(e4:values(), ref:values())
    assert(abs <= 1e-5, "eval mode: no dropout")
    for _, t in ipairs({ e1, e2, e3, e4, ref }) do t:free() end
    free_input(x)
    g:close()
    m:free()
  end },

  { "dropout_on_gradients_match_finite_differences", function()
    -- With dropout active (train mode), the backward must regenerate the forward's masks:
    -- <grad, d> against the central difference of the loss along a random direction d.
    local m, g, x = training_on_golden(5, 1)
    local w = g:tensor("loss_weight", { tag = "activations" })
    local function loss()
      m:set_grad_enabled(false)              -- still training: dropout on, same keys
      local e = m:forward(x)
      local p = ops.mul(e, w)
      local s = ops.sum(p)
      local v = s:item()
      e:free(); p:free(); s:free()
      return v
    end
    m:set_grad_enabled(true)
    local e = m:forward(x)
    m:backward(w)
    e:free()
    for _, name in ipairs({ "encoder.layer.0.attention.self.query.weight", "encoder.layer.1.intermediate.dense.weight",
                            "embeddings.LayerNorm.weight", "embeddings.word_embeddings.weight" }) do
      local p = m:parameter_map()[name]
      local d = T.randn(p.value:shape(), { seed = 9, stream = 1 })
      local gd = ops.mul(p.grad, d)
      local s = ops.sum(gd)
      local dot = s:item()
      gd:free(); s:free()
      local eps = 1e-3
      ops.axpy_(p.value, d, eps)
      local lp = loss()
      ops.axpy_(p.value, d, -2 * eps)
      local lm = loss()
      ops.axpy_(p.value, d, eps)
      d:free()
      local fd = (lp - lm) / (2 * eps)
      assert(math.abs(fd - dot) <= 5e-3 * math.abs(dot) + 1e-3, ("%s: <grad, d> %g, finite difference %g"):format(name, dot, fd))
    end
    w:free()
    free_input(x)
    g:close()
    m:free()
  end },

  { "gradients_accumulate_and_zero_grad", function()
    local m = tiny_embedder()
    m:eval():set_grad_enabled(true)
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local x = golden_input(g)
    local w = g:tensor("loss_weight", { tag = "activations" })
    for _ = 1, 2 do
      local e = m:forward(x)
      m:backward(w)
      e:free()
    end
    local p = m:parameter_map()["encoder.layer.1.output.dense.weight"]
    local ref = g:tensor("grad.encoder.layer.1.output.dense.weight")
    local r = ref:values()
    for i = 1, #r do r[i] = 2 * r[i] end
    assert(rel_err(p.grad:values(), r) <= 1e-3, "two backwards accumulate twice the gradient")
    m:zero_grad()
    for _, v in ipairs(p.grad:values()) do assert(v == 0, "zero_grad") end
    ref:free(); w:free()
    free_input(x)
    g:close()
    m:free()
  end },

  { "random_init_like_transformers_and_save_load_round_trip", function()
    local cfg = bert.config({ hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 4, intermediate_size = 64,
      vocab_size = 50, max_position_embeddings = 16, initializer_range = 0.02 })
    local m = bert.BertModel.new(cfg, { seed = 11 })
    local map = m:parameter_map()
    local v = map["encoder.layer.0.attention.self.query.weight"].value:values()
    local s, sq = 0, 0
    for _, x in ipairs(v) do s = s + x; sq = sq + x * x end
    local std = math.sqrt(sq / #v - (s / #v) ^ 2)
    assert(math.abs(std - 0.02) < 0.003, "std " .. std)
    for _, x in ipairs(map["encoder.layer.0.attention.self.query.bias"].value:values()) do assert(x == 0) end
    for _, x in ipairs(map["embeddings.LayerNorm.weight"].value:values()) do assert(x == 1) end
    local pad_row = map["embeddings.word_embeddings.weight"].value:values()
    for i = 1, 32 do assert(pad_row[i] == 0, "padding row zero") end
    local path = os.tmpname()
    st.save(path, bert.state_list(m))
    local m2 = bert.BertModel.new(cfg, { seed = 12 })
    bert.load_weights(m2, path)
    local a = m2:parameter_map()["encoder.layer.0.attention.self.query.weight"].value:values()
    assert(rel_err(a, v) == 0, "round trip")
    -- a checkpoint with the "bert." prefix loads into a bare model, and vice versa
    local prefixed = {}
    for _, e in ipairs(bert.state_list(m)) do prefixed[#prefixed + 1] = { "bert." .. e[1], e[2] } end
    st.save(path, prefixed)
    bert.load_weights(m2, path)
    os.remove(path)
    m:free(); m2:free()
  end },

  { "roberta_position_ids_from_the_mask", function()
    local cfg = require("trainer.models.roberta").config({ model_type = "xlm-roberta", hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2,
      intermediate_size = 16, vocab_size = 20, max_position_embeddings = 10, pad_token_id = 1, type_vocab_size = 1 })
    local ids = T.from_table({ { 0, 5, 6, 2, 1, 1 }, { 0, 7, 2, 1, 1, 1 } }, { dtype = "i64" })
    local x, owned = bert.prepare_inputs(cfg, { input_ids = ids }, "cpu")
    local p = x.position_ids:tolist()
    assert(table.concat(p[1], ",") == "2,3,4,5,1,1", table.concat(p[1], ","))
    assert(table.concat(p[2], ",") == "2,3,4,1,1,1", table.concat(p[2], ","))
    for _, t in ipairs(owned) do t:free() end
    local long = T.zeros({ 1, 9 }, { dtype = "i32" })
    local ok, err = pcall(bert.prepare_inputs, cfg, { input_ids = long }, "cpu")
    assert(not ok and errors.message(err):find("8 positions", 1, true), errors.message(err))
    ids:free(); long:free()
  end },

  { "bf16_activations_flow_through_f32_weights", function()
    local m = trainer.load_model(data .. "/tiny_bert", { activation_dtype = "bf16" })
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local e, x, a0 = lib.golden_forward(m, g)
    assert(e:dtype() == "bf16", "the embedding is bf16, got " .. e:dtype())
    local ref = g:tensor("embedding")
    local _, abs = rel_err(e:values(), ref:values())
    assert(abs <= 0.05, ("bf16 embedding max abs error %g"):format(abs))
    local w = g:tensor("loss_weight", { dtype = "bf16", tag = "activations" })
    m:backward(w)
    e:free(); w:free(); ref:free()
    assert(memory.stats().by_tag.activations == a0, "activations left after a bf16 backward")
    local p = m:parameter_map()["encoder.layer.0.intermediate.dense.weight"]
    assert(p.value:dtype() == "f32" and p.grad:dtype() == "f32", "f32 weights and grads")
    local gr = g:tensor("grad.encoder.layer.0.intermediate.dense.weight")
    local rel = rel_err(p.grad:values(), gr:values())
    gr:free()
    assert(rel <= 0.05, ("bf16 gradient relative error %g"):format(rel))
    free_input(x)
    g:close()
    m:free()
  end },

  { "base_checkpoint_gets_a_new_classifier_head_with_a_warning", function()
    local warnings = {}
    local m = trainer.load_model(data .. "/tiny_bert", { task = "classification", num_labels = 2,
      on_warning = function(w) warnings[#warnings + 1] = w end })
    assert(m.num_labels == 2 and m.labels[1] == "LABEL_1")
    assert(#warnings == 1 and warnings[1]:find("classifier.weight, classifier.bias", 1, true), warnings[1])
    local w = m:parameter_map()["classifier.weight"].value:values()
    local nonzero = 0
    for _, v in ipairs(w) do if v ~= 0 then nonzero = nonzero + 1 end end
    assert(nonzero == #w, "the new head is randomly initialised")
    m:free()
    warnings = {}
    local c = trainer.load_model(data .. "/tiny_bert_cls", { num_labels = 5, on_warning = function(x) warnings[#warnings + 1] = x end })
    assert(c.num_labels == 5 and warnings[1]:find("shape differs", 1, true), warnings[1])
    c:free()
  end },

  { "load_errors_name_the_file", function()
    local function msg_of(...)
      local ok, err = pcall(trainer.load_model, ...)
      assert(not ok and errors.is_user_error(err), "a user error: " .. tostring(err))
      return errors.message(err)
    end
    local m = msg_of("/nonexistent/model")
    assert(m:find("/nonexistent/model", 1, true) and m:find("config.json", 1, true), m)
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    m = msg_of(dir)
    assert(m:find(dir .. "/config.json", 1, true) and m:find("missing", 1, true), m)
    models.tiny_folder(dir, { seed = 1 })
    -- truncated weights
    local f = io.open(dir .. "/model.safetensors", "rb")
    local bytes = f:read("*a")
    f:close()
    f = io.open(dir .. "/model.safetensors", "wb")
    f:write(bytes:sub(1, #bytes - 100))
    f:close()
    m = msg_of(dir)
    assert(m:find(dir .. "/model.safetensors", 1, true), m)
    -- missing tensors are listed
    models.tiny_folder(dir, { seed = 1 })
    local r = st.load(dir .. "/model.safetensors")
    local keep = {}
    for _, name in ipairs(r:names()) do
      if not name:match("layer%.1%.output%.dense") then keep[#keep + 1] = { name, r:tensor(name) } end
    end
    r:close()
    st.save(dir .. "/model.safetensors", keep)
    for _, e in ipairs(keep) do e[2]:free() end
    m = msg_of(dir)
    assert(m:find("encoder.layer.1.output.dense.weight", 1, true) and m:find("missing", 1, true), m)
    -- garbled config.json
    f = io.open(dir .. "/config.json", "wb")
    f:write("{ \"hidden_size\": ")
    f:close()
    m = msg_of(dir)
    assert(m:find(dir .. "/config.json", 1, true), m)
    os.execute("rm -rf " .. dir)
  end },

  { "tiny_folder_round_trips_through_load_model", function()
    local dir = os.tmpname()
    os.remove(dir)
    models.tiny_folder(dir, { seed = 5, normalize = true, pooling = "cls" })
    local warnings = {}
    local m = trainer.load_model(dir, { on_warning = function(w) warnings[#warnings + 1] = w end })
    assert(#warnings == 0, warnings[1])
    assert(m.task == "embedding" and m.pooling.mode == "cls" and m.normalize and m.max_length == 64)
    local ids = T.from_table({ { 2, 12, 13, 3 } }, { dtype = "i32" })
    local e = m:forward({ input_ids = ids })
    local v = e:values()
    local n = 0
    for _, x in ipairs(v) do n = n + x * x end
    assert(math.abs(n - 1) < 1e-5, "normalised")
    e:free(); ids:free(); m:free()
    models.tiny_folder(dir, { seed = 5, task = "classification" })
    local c = trainer.load_model(dir, { on_warning = function(w) warnings[#warnings + 1] = w end })
    assert(c.task == "classification" and c.num_labels == 3 and #warnings == 0)
    c:free()
    os.execute("rm -rf " .. dir)
  end },
}
