-- The ModernBERT family against transformers on the tiny goldens (tests/ref/make_tiny_modernbert.py):
-- the byte-level BPE tokenizer's ids, the sentence embedding (cosine >= 0.99999), the loss and
-- every parameter gradient (relative 1e-3) with the local layer's window covering every key and
-- with a window of 4 keys each side; the classifier's logits (1e-4), loss and gradients.
local ops = require("trainer.core.ops")
local st = require("trainer.core.safetensors")
local memory = require("trainer.core.memory")
local tokenizer = require("trainer.core.tokenizer")
local registry = require("trainer.models.registry")
local native = require("trainer.native")

local root = native.root()
local data = root .. "/tests/data"
local lib = dofile(root .. "/tests/lua/testlib.lua")
local rel_err = lib.rel_err

local no_warning = lib.no_warning

local function lines(path)
  local out = {}
  for l in io.lines(path) do out[#out + 1] = l end
  return out
end

local input_of = lib.golden_ids

-- Every parameter's gradient against the golden's: grad.<name>, or for the token embeddings the
-- rows grad_rows.<name> at grad_ids (the others zero). Returns the count.
local function check_grads(model, g, prefix, strip)
  local ids = g:tensor(prefix .. "grad_ids"):values()
  local n = 0
  for name, p in model:parameters() do
    n = n + 1
    local hf = strip and name:gsub("^" .. strip, "") or name
    assert(p.grad, name .. ": no gradient")
    local v = p.grad:values()
    local r
    if g:has(prefix .. "grad_rows." .. hf) then
      local rows = g:tensor(prefix .. "grad_rows." .. hf)
      local rv, C = rows:values(), rows:shape()[2]
      rows:free()
      local want, got = {}, {}
      for i, id in ipairs(ids) do
        for c = 1, C do want[#want + 1] = rv[(i - 1) * C + c]; got[#got + 1] = v[id * C + c] end
      end
      local total = 0
      for _, x in ipairs(v) do total = total + math.abs(x) end
      local picked = 0
      for _, x in ipairs(got) do picked = picked + math.abs(x) end
      assert(math.abs(total - picked) <= 1e-6 * math.max(1, total), name .. ": gradient outside the batch's rows")
      v, r = got, want
    else
      local ref = g:tensor(prefix .. "grad." .. hf)
      r = ref:values()
      ref:free()
    end
    local rel = rel_err(v, r)
    assert(rel <= 1e-3, ("%s: gradient relative error %g > 1e-3"):format(name, rel))
  end
  return n
end

-- The tiny embedder with every local layer's window set (0: every key), its golden's embedding,
-- loss and gradients under prefix.
local function embedding_parity(window, prefix)
  local m = trainer.load_model(data .. "/tiny_modernbert", { on_warning = no_warning })
  local fam = registry.of_model(m)
  assert(fam.name == "modernbert")
  if window then for _, layer in ipairs(fam.layers(m)) do if layer.attn.window > 0 then layer.attn.window = window end end end
  local g = st.load(data .. "/golden_tiny_modernbert.safetensors")
  local x = input_of(g, "")
  m:eval():set_grad_enabled(true)
  local a0 = memory.stats().by_tag.activations
  local e = m:forward(x)
  local eref = g:tensor(prefix .. "embedding")
  local B, C = e:shape()[1], e:shape()[2]
  local cos = lib.cosine_rows(e:values(), eref:values(), B, C)
  assert(cos >= 0.99999, ("embedding cosine %.8f < 0.99999"):format(cos))
  local _, abs = rel_err(e:values(), eref:values())
  assert(abs <= 1e-4, ("embedding max abs error %g"):format(abs))
  local w = g:tensor("loss_weight", { tag = "activations" })
  local prod = ops.mul(e, w)
  local loss = ops.sum(prod)
  local lref = g:tensor(prefix .. "loss")
  assert(math.abs(loss:item() - lref:item()) <= 1e-4 * math.max(1, math.abs(lref:item())),
    ("loss %g vs %g"):format(loss:item(), lref:item()))
  m:backward(w)
  for _, t in ipairs({ e, eref, w, prod, loss, lref }) do t:free() end
  assert(memory.stats().by_tag.activations == a0, ("activations after backward: %d bytes, not %d"):format(
    memory.stats().by_tag.activations, a0))
  local n = check_grads(m, g, prefix)
  assert(n == 14, "14 parameters, got " .. n)
  lib.free_input(x)
  g:close()
  m:free()
end

return {
  { "tokenizer_ids_are_transformers", function()
    local tok = tokenizer.load(data .. "/tiny_modernbert")
    local g = st.load(data .. "/golden_tiny_modernbert.safetensors")
    for _, set in ipairs({ { "", "golden_tiny_modernbert_texts.txt" }, { "cls.", "golden_tiny_modernbert_cls_texts.txt" } }) do
      local texts = lines(data .. "/" .. set[2])
      local ids, mask = g:tensor(set[1] .. "input_ids"), g:tensor(set[1] .. "attention_mask")
      local iv, mv, Tn = ids:values(), mask:values(), ids:shape()[2]
      for i, text in ipairs(texts) do
        local got = tok:encode(text)
        local n = 0
        for t = 1, Tn do n = n + mv[(i - 1) * Tn + t] end
        assert(#got == n, ("%q: %d ids, transformers %d"):format(text, #got, n))
        for t = 1, n do
          assert(got[t] == iv[(i - 1) * Tn + t], ("%q: id %d is %d, transformers %d"):format(text, t, got[t],
            iv[(i - 1) * Tn + t]))
        end
      end
      ids:free(); mask:free()
    end
    g:close()
    tok:free()
  end },

  { "config_names_and_layer_kinds", function()
    local m = trainer.load_model(data .. "/tiny_modernbert", { on_warning = no_warning })
    local fam = registry.of_model(m)
    local names = {}
    for name in m:parameters() do names[#names + 1] = name end
    assert(names[1] == "embeddings.tok_embeddings.weight" and names[3] == "layers.0.attn.Wqkv.weight"
      and names[#names] == "final_norm.weight", table.concat(names, " "))
    assert(not m:parameter_map()["layers.0.attn_norm.weight"] and m:parameter_map()["layers.1.attn_norm.weight"])
    local ls = fam.layers(m)
    assert(#ls == 2 and ls[1].attn.window == 0 and ls[2].attn.window == 4, "layer 0 global, layer 1 window 4")
    assert(ls[1].attn.theta == 160000 and ls[2].attn.theta == 10000, "rope thetas")
    -- the older config.json form: global_attn_every_n_layers and the two thetas
    local cfg = fam.config({ model_type = "modernbert", hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4,
      intermediate_size = 48, vocab_size = 100, pad_token_id = 0, global_attn_every_n_layers = 3, global_rope_theta = 5e5,
      local_rope_theta = 1e4, local_attention = 64 }, "test")
    assert(table.concat(cfg.layer_kinds, ",") == "full_attention,sliding_attention,sliding_attention,full_attention")
    assert(cfg.global_rope_theta == 5e5 and cfg.local_rope_theta == 1e4 and not cfg.norm_bias)
    m:free()
  end },

  { "rope_parameters_thetas_are_checked_like_the_fields", function()
    local fam = registry.family("modernbert")
    local function with(theta)
      return { model_type = "modernbert", hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
        intermediate_size = 48, vocab_size = 100, rope_parameters = {
          full_attention = { rope_theta = theta, rope_type = "default" },
          sliding_attention = { rope_theta = 1e4 } } }
    end
    assert(fam.config(with(2e5), "c.json").global_rope_theta == 2e5)
    for _, bad in ipairs({ 0, -1e4, 1.6e19, "1e4", { 1 } }) do
      local ok, e = pcall(fam.config, with(bad), "c.json")
      assert(not ok and tostring(e):find("^c.json: rope_parameters.full_attention.rope_theta is "), tostring(e))
    end
  end },

  { "embedding_loss_and_every_gradient_window_over_all_keys", function() embedding_parity(0, "wall.") end },

  { "embedding_loss_and_every_gradient_window_of_4", function() embedding_parity(nil, "w8.") end },

  { "classifier_logits_loss_and_every_gradient", function()
    local m = trainer.load_model(data .. "/tiny_modernbert_cls", { on_warning = no_warning })
    assert(m.task == "classification" and m.num_labels == 3)
    local g = st.load(data .. "/golden_tiny_modernbert.safetensors")
    local x = input_of(g, "cls.")
    m:eval():set_grad_enabled(true)
    local a0 = memory.stats().by_tag.activations
    lib.classifier_loss_backward(m, g, m:forward(x), a0, 1e-4, "cls.")
    local n = check_grads(m, g, "cls.")
    assert(n == 18, "18 parameters, got " .. n)
    lib.free_input(x)
    g:close()
    m:free()
  end },
  { "checkpointing_gives_the_same_gradients_and_lora_adapts_the_family_targets", function()
    local checkpoint = require("trainer.train.grad_checkpoint")
    local lora = require("trainer.train.lora")
    local g = st.load(data .. "/golden_tiny_modernbert.safetensors")
    local function grads(ckpt, adapters)
      local m = trainer.load_model(data .. "/tiny_modernbert", { on_warning = no_warning })
      m:train()
      m.rng.seed, m.rng.step = 5, 2
      local names = adapters and lora.apply(m, { r = 2, alpha = 4, dropout = 0.1 }) or nil
      if ckpt then checkpoint.apply(m, { every = 1 }) end
      local x = input_of(g, "")
      local e = m:forward(x)
      local w = g:tensor("loss_weight", { tag = "activations" })
      m:backward(w)
      local out = {}
      for name, p in m:parameters() do if p.grad then out[name] = p.grad:values() end end
      e:free(); w:free(); lib.free_input(x); m:free()
      return out, names
    end
    local plain, ck = grads(false), grads(true)
    local n = 0
    for name, v in pairs(plain) do
      n = n + 1
      local c = assert(ck[name], name .. ": no gradient under checkpointing")
      for i = 1, #v do assert(v[i] == c[i], ("%s[%d]: %g vs %g under checkpointing"):format(name, i, c[i], v[i])) end
    end
    assert(n == 14, n .. " gradients")
    local lg, names = grads(true, true)
    assert(#names == 4 and names[1] == "layers.0.attn.Wqkv" and names[2] == "layers.0.mlp.Wi", table.concat(names, " "))
    local trained = 0
    for name in pairs(lg) do
      assert(name:match("lora_[AB]"), name .. " trains under LoRA")
      trained = trained + 1
    end
    assert(trained == 8, trained .. " LoRA gradients")
    g:close()
  end },
  -- A checkpointed backward re-runs a segment's last layer for its keeps alone
  -- (Layer:keep_for_backward: no MLP output product, trainer.nn.Checkpoint) and the last
  -- segment not at all: with dropout on every site, a full fine-tune (mlp.Wo trained: its
  -- input remade) and LoRA on both Wo (a wrapper: run in full) give the plain run's output
  -- and gradients bit for bit, and a re-run makes no plain mlp.Wo product in its last layer.
  { "checkpoint_rerun_skips_the_output_product_same_bits", function()
    local T = require("trainer.core.tensor")
    local Linear = require("trainer.nn.linear")
    local checkpoint = require("trainer.train.grad_checkpoint")
    local lora = require("trainer.train.lora")
    local raw = { model_type = "modernbert", hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4,
      intermediate_size = 48, vocab_size = 200, max_position_embeddings = 64, attention_dropout = 0.1,
      mlp_dropout = 0.1, embedding_dropout = 0.1, global_attn_every_n_layers = 2, local_attention = 8 }
    local function step(spec, targets)
      local cfg, fam = registry.config(raw, "test")
      local m = fam.build("classification", { config = cfg, seed = 3, num_labels = 2 })
      if targets then lora.apply(m, { r = 2, alpha = 4, dropout = 0.1, targets = targets }) end
      local sizes = spec and checkpoint.apply(m, spec)
      m:train()
      m.rng.seed, m.rng.step = 11, 4
      -- count the mlp.Wo products: every plain Linear's forward on an [.., I] input
      local products, linear = 0, Linear.forward
      Linear.forward = function(self, x)
        if self.in_features == raw.intermediate_size then products = products + 1 end
        return linear(self, x)
      end
      local ok, res = pcall(function()
        local x = lib.padded_batch(3, 12)
        local y = m:forward(x)
        local w = T.randn(y:shape(), { seed = 9, stream = 1, tag = "activations" })
        m:backward(w)
        local out = { y = y:values() }
        for name, p in m:parameters() do if p.grad then out[name] = p.grad:values() end end
        y:free(); w:free(); lib.free_input(x)
        return out
      end)
      Linear.forward = linear
      m:free()
      if not ok then error(res, 0) end
      return res, products, sizes
    end
    for _, targets in ipairs({ false, { "Wqkv", "Wo" } }) do
      local plain, p0 = step(false, targets)
      assert(p0 == (targets and 0 or 4), ("%d mlp.Wo products in a plain step"):format(p0))
      for _, spec in ipairs({ { every = 1 }, { every = 2 }, { segments = 3 } }) do
        local got, p, sizes = step(spec, targets)
        local label = ("%s, %s"):format(targets and "LoRA" or "full", spec.every and ("every " .. spec.every)
          or ("segments " .. spec.segments))
        local n = 0
        for name, v in pairs(plain) do
          local c = assert(got[name], label .. ": no " .. name)
          for i = 1, #v do assert(v[i] == c[i], ("%s: %s[%d] %.9g, plain %.9g"):format(label, name, i, c[i], v[i])) end
          n = n + 1
        end
        assert(n > (targets and 8 or 20), label .. ": " .. n .. " tensors")
        -- plain mlp.Wo: one product per layer forward, and per layer a re-run makes but for
        -- its segment's last; the last segment is not re-run
        local want = 4 + (4 - sizes[#sizes]) - (#sizes - 1)
        if not targets then assert(p == want, ("%s: %d mlp.Wo products, want %d"):format(label, p, want)) end
      end
    end
  end },
  { "modernbert_geglu_backward_in_place", function()
    -- the MLP's backward overwrites h with dh on the CPU: the same values as a new dh, in both
    -- GELU forms, over a row longer than the kernel's in-place chunk (512)
    local T = require("trainer.core.tensor")
    for _, kind in ipairs({ 0, 1 }) do
      local N, I = 3, 700
      local h = T.randn({ N, 2 * I }, { seed = 5, stream = kind })
      local d = T.randn({ N, I }, { seed = 6, stream = kind })
      local dh = ops.geglu_backward(d, h, kind)
      local want = dh:values()
      dh:free()
      local hc = h:clone()
      local got = ops.geglu_backward_(d, hc, kind)
      assert(got == hc, "the in-place form returns h")
      local v = got:values()
      for i = 1, #want do assert(v[i] == want[i], ("kind %d [%d]: %g vs %g"):format(kind, i, v[i], want[i])) end
      h:free(); d:free(); hc:free()
    end
  end },
}
