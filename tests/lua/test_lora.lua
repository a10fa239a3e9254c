-- trainer.lora against PEFT (tests/data/lora_golden.safetensors, tests/data/tiny_lora_adapter/, made by
-- tests/ref/make_lora_golden.py): forward and every trainable gradient of two set-ups (query/value,
-- bias none; rslora on dense layers, bias all); a PEFT-saved adapter loads and gives PEFT's output;
-- our save -> load round trip with PEFT's key names and shapes; training leaves every frozen byte
-- as it was, with no grad or optimizer state for frozen weights; input gradients flow through frozen
-- layers; LoraLinear against its formula with dropout on the LoRA input (mask replayed in the
-- backward) and PEFT's init; merge equals unmerged; `trainer merge` writes a folder that loads as a plain model; user
-- errors; grads + optimizer of LoRA r 8 on query,value under 5 % of full fine-tuning on
-- all-MiniLM-L6-v2 (skipped when absent; make fetch-models).
local T = require("trainer.core.tensor")
local ops = require("trainer.core.ops")
local st = require("trainer.core.safetensors")
local json = require("trainer.core.json")
local optim = require("trainer.train.optim")
local errors = require("trainer.core.errors")
local lora = require("trainer.train.lora")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

local root = native.root()
local data = root .. "/tests/data"
local tiny = data .. "/tiny_bert"

local function quiet() return { on_warning = function(w) error("unexpected warning: " .. w) end } end

local function tmpdir()
  local p = io.popen("mktemp -d /tmp/trainer_lora.XXXXXX")
  local d = p:read("*l")
  p:close()
  return d
end

local function rmrf(d) os.execute("rm -rf '" .. d .. "'") end

local function max_abs_diff(a, b)
  assert(#a == #b, ("lengths %d vs %d"):format(#a, #b))
  local m = 0
  for i = 1, #a do
    local d = math.abs(a[i] - b[i])
    if d > m or d ~= d then m = d end
  end
  return m
end

local rel_err, golden_input, free_input = lib.rel_err, lib.golden_input, lib.free_input

local function copy_into(dst, src)
  runtime.check(C.tr_tensor_copy(runtime.ctx, dst:ptr(), src:ptr()), "copy")
end

local setups = {
  a = { r = 4, alpha = 8, targets = { "query", "value" } },
  b = { r = 2, alpha = 4, rslora = true, bias = "all", targets = { "attention.output.dense", "intermediate.dense" } },
}

-- Sets the golden's <tag>.set.* values into the model's parameters.
local function set_from_golden(model, lg, tag)
  local params, n = model:parameter_map(), 0
  for _, key in ipairs(lg:names()) do
    local name = key:match("^" .. tag .. "%.set%.(.+)$")
    if name then
      assert(params[name], "no parameter " .. name)
      local t = lg:tensor(key)
      copy_into(params[name].value, t)
      t:free()
      n = n + 1
    end
  end
  assert(n > 0, "no set-up values for " .. tag)
end

-- The tiny model with set-up `tag` applied and its values from the LoRA golden lg.
local function adapted(lg, tag)
  local m = trainer.load_model(tiny, quiet())
  lora.apply(m, setups[tag])
  set_from_golden(m, lg, tag)
  return m
end

-- Embedding and loss gradient on the golden inputs: returns the embedding values (backward
-- done with d loss / d embedding = loss_weight).
local function forward_backward(model, g, backward)
  local x = golden_input(g)
  local e = model:forward(x)
  local v = e:values()
  if backward then
    local lw = g:tensor("loss_weight", { tag = "activations" })
    model:backward(lw)
    lw:free()
  end
  e:free()
  free_input(x)
  return v
end

local function snapshot(model, frozen_only)
  local out = {}
  for name, p in model:parameters() do
    if not frozen_only or not p.trainable then out[name] = p.value:values() end
  end
  return out
end

-- A tiny training run: n AdamW steps on sum(embedding * loss_weight) in train mode (dropout on).
local function train_steps(model, n, lr)
  local g = st.load(data .. "/golden_tiny_bert.safetensors")
  local opt = optim.new(model, { name = "adamw", lr = lr or 1e-2, weight_decay = 0.01 })
  model:train()
  for step = 1, n do
    model.rng.step = step
    opt:zero_grad()
    forward_backward(model, g, true)
    opt:step()
  end
  g:close()
  return opt
end

return {
  { "peft_golden_forward_and_every_trainable_gradient", function()
    local lg = st.load(data .. "/lora_golden.safetensors")
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    for _, tag in ipairs({ "a", "b" }) do
      local m = trainer.load_model(tiny, quiet())
      m:eval():set_grad_enabled(true)
      lora.apply(m, setups[tag])
      set_from_golden(m, lg, tag)
      local emb = forward_backward(m, g, true)
      local ref = lg:tensor(tag .. ".embedding")
      local d = max_abs_diff(emb, ref:values())
      ref:free()
      assert(d <= 1e-5, ("%s: embedding max abs diff %g vs PEFT"):format(tag, d))
      local n = 0
      for name, p in m:parameters() do
        local key = tag .. ".grad." .. name
        assert(p.trainable == lg:has(key), ("%s: %s trainable = %s but PEFT says %s"):format(tag, name,
          tostring(p.trainable), tostring(lg:has(key))))
        if p.trainable then
          n = n + 1
          local r = lg:tensor(key)
          local rv = r:values()
          r:free()
          local v = p.grad and p.grad:values()
          if not v then   -- unreached (the pooler under mean pooling): PEFT wrote zeros
            v = {}
            for i = 1, #rv do v[i] = 0 end
          end
          if name:match("attention%.self%.key%.bias$") then
            assert(max_abs_diff(v, rv) <= 1e-5, name)
          else
            local rel = rel_err(v, rv)
            assert(rel <= 1e-3, ("%s: %s gradient relative error %g vs PEFT"):format(tag, name, rel))
          end
        else
          assert(p.grad == nil, tag .. ": a frozen parameter got a grad buffer: " .. name)
        end
      end
      assert(n == (tag == "a" and 8 or 26), tag .. ": trainable count " .. n)
      m:free()
    end
    lg:close(); g:close()
  end },

  { "peft_saved_adapter_loads_and_gives_peft_output", function()
    local lg = st.load(data .. "/lora_golden.safetensors")
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local m = trainer.load_model(tiny, quiet())
    local names = lora.load(m, data .. "/tiny_lora_adapter")
    assert(#names == 4, "adapted modules " .. #names)
    assert(m.lora.spec.r == 4 and m.lora.spec.alpha == 8 and m.lora.spec.bias == "none")
    local emb = forward_backward(m, g, false)
    local ref = lg:tensor("a.embedding")
    local d = max_abs_diff(emb, ref:values())
    ref:free()
    assert(d <= 1e-5, ("PEFT adapter: embedding max abs diff %g"):format(d))
    m:free(); lg:close(); g:close()
  end },

  { "save_load_round_trip_with_peft_keys_and_shapes", function()
    local lg = st.load(data .. "/lora_golden.safetensors")
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local m = adapted(lg, "b")
    local dir = tmpdir()
    lora.save(m, dir .. "/adapter", nil, "tests/data/tiny_bert")
    local emb = forward_backward(m, g, false)
    -- config
    local cfg = json.read(dir .. "/adapter/adapter_config.json")
    assert(cfg.peft_type == "LORA" and cfg.r == 2 and cfg.lora_alpha == 4 and cfg.lora_dropout == 0)
    assert(cfg.use_rslora == true and cfg.bias == "all" and cfg.task_type == "FEATURE_EXTRACTION")
    assert(cfg.base_model_name_or_path == "tests/data/tiny_bert" and cfg.modules_to_save == json.null)
    assert(table.concat(cfg.target_modules, ",") == "attention.output.dense,intermediate.dense")
    -- keys and shapes
    local r = st.load(dir .. "/adapter/adapter_model.safetensors")
    local keys = {}
    for _, k in ipairs(r:names()) do keys[k] = r:info(k) end
    local nA = 0
    for _, layer in ipairs({ 0, 1 }) do
      for _, mod in ipairs({ { "attention.output.dense", 32, 32 }, { "intermediate.dense", 32, 64 } }) do
        local base = ("base_model.model.encoder.layer.%d.%s"):format(layer, mod[1])
        local A, B = keys[base .. ".lora_A.weight"], keys[base .. ".lora_B.weight"]
        assert(A and B, "missing lora keys of " .. base)
        assert(table.concat(A.shape, ",") == "2," .. mod[2], base .. " lora_A shape " .. table.concat(A.shape, ","))
        assert(table.concat(B.shape, ",") == mod[3] .. ",2", base .. " lora_B shape " .. table.concat(B.shape, ","))
        assert(A.dtype == "F32" and B.dtype == "F32")
        assert(keys[base .. ".base_layer.bias"], "PEFT's key for the adapted layer's bias: " .. base .. ".base_layer.bias")
        nA = nA + 1
      end
    end
    assert(keys["base_model.model.encoder.layer.0.attention.self.key.bias"], "bias = all saves every bias")
    assert(not keys["base_model.model.encoder.layer.0.attention.self.key.weight"], "a frozen weight was saved")
    assert(r:count() == 26, "tensors saved: " .. r:count())
    r:close()
    -- load into a fresh model: identical output
    local m2 = trainer.load_model(tiny, quiet())
    lora.load(m2, dir .. "/adapter")
    local emb2 = forward_backward(m2, g, false)
    assert(max_abs_diff(emb, emb2) == 0, "round trip changed the output")
    m:free(); m2:free(); lg:close(); g:close()
    rmrf(dir)
  end },

  { "lora_linear_dropout_on_the_lora_input_replayed_in_backward", function()
    local Linear = require("trainer.nn.linear")
    local lin = Linear.new(6, 5)
    local W = T.randn({ 5, 6 }, { seed = 1, stream = 1, tag = "weights" })
    copy_into(lin.weight.value, W)
    lin.bias.value:fill(0.25)
    lin:set_trainable(false)
    local rng = { seed = 3, step = 7 }
    local w = lora.LoraLinear.new(lin, { r = 2, alpha = 6, dropout = 0.5 }, 1, rng, 0)
    assert(w.scale == 3)
    -- PEFT's init: A kaiming-uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), B zeros; rslora: alpha / sqrt(r)
    local amax, anz = 0, 0
    for _, v in ipairs(w.lora_A.value:values()) do amax = math.max(amax, math.abs(v)); if v ~= 0 then anz = anz + 1 end end
    assert(amax <= 1 / math.sqrt(6) and amax > 0.2 and anz == 12, "lora_A init: max |a| " .. amax)
    for _, v in ipairs(w.lora_B.value:values()) do assert(v == 0, "lora_B must start at zero") end
    local w2 = lora.LoraLinear.new(Linear.new(4, 4), { r = 4, alpha = 8, rslora = true }, 2, rng, 0)
    assert(w2.scale == 4, "rslora scale")
    w2:free()
    local B = T.randn({ 5, 2 }, { seed = 1, stream = 2, tag = "weights" })
    copy_into(w.lora_B.value, B)
    local x = T.randn({ 3, 6 }, { seed = 1, stream = 3, tag = "activations" })
    local dy = T.randn({ 3, 5 }, { seed = 1, stream = 4, tag = "activations" })
    local y = w:forward(x)
    rng.step = 8   -- the backward must use the forward's key, not the current step
    local dx = w:backward(dy)
    -- by hand, with the mask of key (seed 3, step 7, layer 10001, op 7)
    local key = ops.rng_key({ seed = 3, step = 7, layer = 10001, op = 7 })
    local xd = ops.dropout(x, 0.5, key)
    assert(max_abs_diff(xd:values(), x:values()) > 0, "dropout did nothing")
    local a = ops.linear(xd, w.lora_A.value)
    local l = ops.linear(a, B)
    local y_ref = ops.linear(x, W, lin.bias.value)
    ops.axpy_(y_ref, l, 3)
    assert(max_abs_diff(y:values(), y_ref:values()) <= 1e-6, "forward differs from base + scale * B A dropout(x)")
    local dl = ops.scale(dy, 3)
    local dB = T.zeros({ 5, 2 }, { tag = "grads" })
    local da = ops.linear_backward(dl, a, B, dB)
    local dA = T.zeros({ 2, 6 }, { tag = "grads" })
    local dxd = ops.linear_backward(da, xd, w.lora_A.value, dA)
    local dx_ref = ops.linear_backward(dy, x, W)
    local dxl = ops.dropout_backward(dxd, 0.5, key)
    ops.add_(dx_ref, dxl)
    assert(max_abs_diff(dx:values(), dx_ref:values()) <= 1e-6, "dx differs")
    -- relative to the largest entry: the products fold the scale into alpha, so the last
    -- bit may round the other way (dA's entries reach 77)
    assert(rel_err(w.lora_A.grad:values(), dA:values()) <= 1e-6, "dA differs")
    assert(rel_err(w.lora_B.grad:values(), dB:values()) <= 1e-6, "dB differs")
    assert(lin.weight.grad == nil and lin.bias.grad == nil, "the frozen base got a gradient")
    for _, t in ipairs({ W, B, x, dy, y, dx, xd, a, l, y_ref, dl, dB, da, dA, dxd, dx_ref, dxl }) do t:free() end
    w:free()
  end },

  { "backward_into_adds_the_input_gradient_in_the_products", function()
    -- LoraLinear and Linear: backward(dy, nil, nil, into) leaves into + backward(dy) in into;
    -- with a LoRA dropout of 0 both paths add in their products (no add_), with 0.5 the
    -- adapter's path adds inside dropout_linear_backward (no add_ either)
    local Linear = require("trainer.nn.linear")
    local x = T.randn({ 3, 6 }, { seed = 2, stream = 1, tag = "activations" })
    local dy = T.randn({ 3, 5 }, { seed = 2, stream = 2, tag = "activations" })
    local start = T.randn({ 3, 6 }, { seed = 2, stream = 3, tag = "activations" })
    local add_calls, add = 0, ops.add_
    local function check_into(m, want_adds, what)
      local y1 = m:forward(x)
      local dx = m:backward(dy)
      local y2 = m:forward(x)
      local into = start:clone()
      add_calls = 0
      ops.add_ = function(...) add_calls = add_calls + 1; return add(...) end
      local ok, r = pcall(m.backward, m, dy, nil, nil, into)
      ops.add_ = add
      assert(ok, r)
      assert(r == into, what .. ": returns into")
      assert(add_calls == want_adds, ("%s: %d add_ calls, want %d"):format(what, add_calls, want_adds))
      local want = start:clone()
      ops.add_(want, dx)
      assert(max_abs_diff(into:values(), want:values()) <= 1e-6, what .. ": into + dx differs")
      for _, t in ipairs({ y1, dx, y2, into, want }) do t:free() end
    end
    for _, p in ipairs({ 0, 0.5 }) do
      local lin = Linear.new(6, 5)
      local W = T.randn({ 5, 6 }, { seed = 2, stream = 4, tag = "weights" })
      copy_into(lin.weight.value, W)
      lin:set_trainable(false)
      local w = lora.LoraLinear.new(lin, { r = 2, alpha = 6, dropout = p }, 1, { seed = 3, step = 7 }, 0)
      local B = T.randn({ 5, 2 }, { seed = 2, stream = 5, tag = "weights" })
      copy_into(w.lora_B.value, B)
      check_into(w, 0, "lora dropout " .. p)
      W:free(); B:free(); w:free()
    end
    local lin = Linear.new(6, 5)
    local W = T.randn({ 5, 6 }, { seed = 2, stream = 6, tag = "weights" })
    copy_into(lin.weight.value, W)
    check_into(lin, 0, "linear")
    W:free(); lin:free(); x:free(); dy:free(); start:free()
  end },

  { "training_changes_no_frozen_byte_and_keeps_no_state_for_them", function()
    local m = trainer.load_model(tiny, quiet())
    lora.apply(m, { r = 4, alpha = 8, dropout = 0.1, targets = { "query", "value" } })
    local before = snapshot(m, true)
    local opt = train_steps(m, 3)
    local after = snapshot(m, true)
    local nfrozen = 0
    for name, v in pairs(before) do
      nfrozen = nfrozen + 1
      local w = after[name]
      for i = 1, #v do
        if v[i] ~= w[i] then error(("frozen %s[%d] changed: %.9g -> %.9g"):format(name, i, v[i], w[i])) end
      end
    end
    assert(nfrozen == 39, "frozen parameters " .. nfrozen)
    local moved = 0
    for name, p in m:parameters() do
      if p.trainable then
        if name:match("lora_B") then
          for _, x in ipairs(p.value:values()) do if x ~= 0 then moved = moved + 1 break end end
        end
      else
        assert(p.grad == nil, "grad buffer for frozen " .. name)
        assert(opt.state_[name] == nil, "optimizer state for frozen " .. name)
      end
    end
    assert(moved == 4, "lora_B tensors that trained: " .. moved)
    local mem = opt:memory()
    assert(mem.grads == 8 * 4 * 32 * 4, "grad bytes " .. mem.grads)
    assert(mem.optimizer == 2 * mem.grads, "optimizer bytes " .. mem.optimizer)
    opt:free(); m:free()
  end },

  { "input_gradients_flow_through_frozen_layers", function()
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local m = trainer.load_model(tiny, quiet())
    -- only layer 0 adapted: its gradient must come back through the frozen layer 1
    local names = lora.apply(m, { targets = { "encoder.layer.0.attention.self.query" } })
    assert(#names == 1 and names[1] == "encoder.layer.0.attention.self.query")
    m:eval():set_grad_enabled(true)
    forward_backward(m, g, true)
    local p = m:parameter_map()["encoder.layer.0.attention.self.query.lora_B.weight"]
    local norm = ops.global_norm({ p.grad })
    assert(norm > 1e-6, "no gradient reached layer 0's adapter: " .. norm)
    m:free(); g:close()
  end },

  { "merge_equals_unmerged_and_trainer_merge_writes_a_plain_folder", function()
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local lg = st.load(data .. "/lora_golden.safetensors")
    local m = adapted(lg, "b")
    m:eval()
    local unmerged = forward_backward(m, g, false)
    local merged_names = lora.merge(m)
    assert(#merged_names == 4 and not lora.is_applied(m) and m.lora == nil)
    for name in m:parameters() do assert(not name:match("lora_"), "left after merge: " .. name) end
    local merged = forward_backward(m, g, false)
    local d = max_abs_diff(unmerged, merged)
    assert(d <= 1e-5, ("merged vs unmerged max abs diff %g"):format(d))
    m:free()
    -- the command, with the PEFT adapter: the folder loads as a plain model with PEFT's output
    local dir = tmpdir()
    local merge = require("trainer.cli.commands.merge")
    merge.run({ "merge", tiny, data .. "/tiny_lora_adapter", dir .. "/out" })
    for _, f in ipairs({ "config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "modules.json",
      "1_Pooling/config.json" }) do
      local fh = io.open(dir .. "/out/" .. f, "rb")
      assert(fh, "merged folder lacks " .. f)
      fh:close()
    end
    local m2 = trainer.load_model(dir .. "/out", quiet())
    local out = forward_backward(m2, g, false)
    local ref = lg:tensor("a.embedding")
    local d2 = max_abs_diff(out, ref:values())
    ref:free()
    assert(d2 <= 1e-5, ("trainer merge output vs PEFT max abs diff %g"):format(d2))
    m2:free()
    -- OUT_DIR exists: refused, nothing touched
    local ok, err = pcall(merge.run, { "merge", tiny, data .. "/tiny_lora_adapter", dir .. "/out" })
    assert(not ok and errors.is_user_error(err) and err.msg:find("already exists", 1, true), tostring(err))
    rmrf(dir); g:close(); lg:close()
  end },

  { "modules_to_save_and_bias_modes", function()
    local m = trainer.load_model(data .. "/tiny_bert_cls", quiet())
    local names = lora.apply(m, { r = 2, targets = { "query" }, bias = "lora_only", modules_to_save = { "classifier" } })
    assert(#names == 2 and names[1] == "bert.encoder.layer.0.attention.self.query")
    local trainable = {}
    for name, p in m:parameters() do if p.trainable then trainable[#trainable + 1] = name end end
    table.sort(trainable)
    local want = { "bert.encoder.layer.0.attention.self.query.bias", "bert.encoder.layer.0.attention.self.query.lora_A.weight",
      "bert.encoder.layer.0.attention.self.query.lora_B.weight", "bert.encoder.layer.1.attention.self.query.bias",
      "bert.encoder.layer.1.attention.self.query.lora_A.weight", "bert.encoder.layer.1.attention.self.query.lora_B.weight",
      "classifier.bias", "classifier.weight" }
    assert(table.concat(trainable, " ") == table.concat(want, " "), table.concat(trainable, " "))
    local dir = tmpdir()
    lora.save(m, dir, nil, "tests/data/tiny_bert_cls")
    local cfg = json.read(dir .. "/adapter_config.json")
    assert(cfg.task_type == "SEQ_CLS" and cfg.modules_to_save[1] == "classifier")
    local r = st.load(dir .. "/adapter_model.safetensors")
    assert(r:has("base_model.model.classifier.weight") and r:has("base_model.model.classifier.bias"))
    assert(r:has("base_model.model.bert.encoder.layer.1.attention.self.query.base_layer.bias"))
    assert(r:count() == 8)
    r:close()
    rmrf(dir)
    m:free()
  end },

  -- Under frozen embeddings the first layer owes its input no gradient: its frozen key
  -- projection is skipped whole and q, v skip their input products (BertModel -> BertEncoder ->
  -- BertLayer -> BertAttention want_dx = false). Every LoRA gradient is bit for bit the one of the
  -- same model with trainable word embeddings (where the whole input gradient is computed), in
  -- train mode (dropout on) and with checkpointing.
  { "frozen_embeddings_skip_the_first_layers_input_products_same_grads", function()
    local gck = require("trainer.train.grad_checkpoint")
    local lg = st.load(data .. "/lora_golden.safetensors")
    local g = st.load(data .. "/golden_tiny_bert.safetensors")
    local function run(embeddings_train, checkpoint)
      local m = adapted(lg, "a")
      if embeddings_train then
        for name, p in m:parameters() do
          if name:match("word_embeddings%.weight$") then p.trainable = true end
        end
      end
      if checkpoint then gck.apply(m, true) end
      local calls = {}
      for name, mod in m:named_modules() do
        if name:match("layer%.[01]%.attention%.self%.key$") then
          local inner = mod.backward
          mod.backward = function(self, ...) calls[name] = (calls[name] or 0) + 1; return inner(self, ...) end
        end
      end
      m:train()
      m.rng.step = 3
      forward_backward(m, g, true)
      local grads = {}
      for name, p in m:parameters() do
        if name:match("lora_") then grads[name] = p.grad:values() end
      end
      m:free()
      return grads, calls
    end
    for _, ck in ipairs({ false, true }) do
      local skipped, c1 = run(false, ck)
      local full, c2 = run(true, ck)
      local layer0, layer1 = "encoder.layer.0.attention.self.key", "encoder.layer.1.attention.self.key"
      assert(c1[layer0] == nil and c1[layer1] == 1, ("checkpoint %s: frozen run called key backward %s / %s times"):format(
        tostring(ck), tostring(c1[layer0]), tostring(c1[layer1])))
      assert(c2[layer0] == 1 and c2[layer1] == 1, "trainable-embeddings run skipped a key backward")
      local n = 0
      for name, v in pairs(full) do
        n = n + 1
        assert(skipped[name], "no gradient for " .. name)
        assert(max_abs_diff(skipped[name], v) == 0, ("checkpoint %s: %s differs by %g"):format(tostring(ck), name,
          max_abs_diff(skipped[name], v)))
      end
      assert(n == 8, "LoRA tensors compared: " .. n)
    end
    lg:close(); g:close()
  end },

  { "user_errors_name_the_fix", function()
    local m = trainer.load_model(tiny, quiet())
    assert(#lora.apply(m, false) == 0 and not lora.is_applied(m) and m.lora == nil, "lora = false changed the model")
    local ok, err = pcall(lora.apply, m, { targets = { "qkv" } })
    assert(not ok and errors.is_user_error(err), tostring(err))
    assert(err.msg:find('"qkv" matches no Linear', 1, true) and err.msg:find("attention.self.query", 1, true)
      and err.msg:find("intermediate.dense", 1, true), err.msg)
    -- nothing was frozen by the refused call
    for _, p in m:parameters() do assert(p.trainable, "a refused apply froze parameters") end
    ok, err = pcall(lora.apply, m, { targets = {} })
    assert(not ok and err.msg:find("lora.targets: is empty", 1, true), tostring(err))
    assert(err.msg:find("PEFT's defaults", 1, true), err.msg)
    ok, err = pcall(lora.apply, m, { targets = { "query" }, bias = "some" })
    assert(not ok and err.msg:find("bias", 1, true), tostring(err))
    lora.apply(m, { targets = { "query" } })
    ok, err = pcall(lora.apply, m, { targets = { "value" } })
    assert(not ok and err.msg:find("already has LoRA", 1, true), tostring(err))
    m:free()
    -- an adapter for other targets: its tensors name no parameter of this model
    local m2 = trainer.load_model(tiny, quiet())
    lora.apply(m2, { targets = { "key" } })
    ok, err = pcall(lora.load, m2, data .. "/tiny_lora_adapter")
    assert(not ok and errors.is_user_error(err) and err.msg:find("names no parameter", 1, true), tostring(err))
    m2:free()
    local m3 = trainer.load_model(tiny, quiet())
    ok, err = pcall(lora.load, m3, data .. "/no_such_adapter")
    assert(not ok and err.msg:find("adapter_config.json: missing", 1, true), tostring(err))
    m3:free()
  end },
}
