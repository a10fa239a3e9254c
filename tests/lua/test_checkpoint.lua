-- Gradient checkpointing (trainer.train.grad_checkpoint, trainer.nn.Checkpoint): with dropout ON and
-- in fp32 on the CPU, every segmentation gives the same loss and every parameter gradient
-- BITWISE as the plain model, with a lower peak of `activations` (reset before each run);
-- names and parameters are unchanged; the segmentation arithmetic; frozen layers still
-- pass input gradients; bad specs are user errors. all-MiniLM-L6-v2 (short sequences)
-- when models/ has it.
local T = require("trainer.core.tensor")
local memory = require("trainer.core.memory")
local bert = require("trainer.models.bert")
local models = require("trainer.models")
local checkpoint = require("trainer.train.grad_checkpoint")
local native = require("trainer.native")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

-- An i32 [rows, cols] tensor from a flat list of integers.
local function int_tensor(values, shape)
  local rows = {}
  for r = 1, shape[1] do
    local row = {}
    for c = 1, shape[2] do row[c] = values[(r - 1) * shape[2] + c] end
    rows[r] = row
  end
  return T.from_table(rows, { dtype = "i32" })
end

local bytes = lib.bytes

local function tiny_encoder(layers, seed)
  local cfg = bert.config({ hidden_size = 32, num_hidden_layers = layers, num_attention_heads = 4,
    intermediate_size = 64, vocab_size = 60, max_position_embeddings = 64, hidden_dropout_prob = 0.1,
    attention_probs_dropout_prob = 0.1 }, "tiny")
  return bert.SentenceEncoder.new(bert.BertModel.new(cfg, { seed = seed or 1, pooler = false }), { pooling = "mean" })
end

-- A fixed batch [B, Tn] of ids with some padding, and a fixed loss weight [B, C].
local function batch(B, Tn, width, vocab)
  local ids, mask = {}, {}
  for b = 0, B - 1 do
    local len = Tn - (b % 3)
    for t = 1, Tn do
      local i = b * Tn + t
      ids[i] = t <= len and (((b * 7 + t * 13) % (vocab - 5)) + 5) or 0
      mask[i] = t <= len and 1 or 0
    end
  end
  local x = { input_ids = int_tensor(ids, { B, Tn }), attention_mask = int_tensor(mask, { B, Tn }) }
  local w = T.randn({ B, width }, { seed = 9, stream = 1, tag = "activations" })
  return x, w
end

local function free_input(x, w)
  x.input_ids:free(); x.attention_mask:free(); w:free()
end

-- fn(model, x, w) on a tiny encoder of `layers` layers and a batch [B, Tn] (width 32,
-- vocab 60), all freed after it.
local function with_tiny(layers, B, Tn, fn)
  local model = tiny_encoder(layers)
  local x, w = batch(B, Tn, 32, 60)
  fn(model, x, w)
  free_input(x, w)
  model:free()
end

-- One forward + backward of loss = sum(embedding * w) with dropout on; returns the loss,
-- the gradients by name (value lists) and the peak activation bytes above the start.
local function run(model, x, w, step)
  lib.clear_grads(model)
  model:train()
  model.rng.step = step or 5
  memory.reset_peak()
  local a0 = memory.stats().by_tag.activations
  local e = model:forward(x)
  local loss = lib.dot(e:values(), w:values())
  model.rng.step = 999   -- the loop moving on must not change what backward replays
  model:backward(w)
  e:free()
  local st = memory.stats()
  local peak = st.peak_by_tag.activations - a0
  assert(st.by_tag.activations == a0, ("activations left after backward: %d bytes"):format(st.by_tag.activations - a0))
  local grads = {}
  for name, p in model:parameters() do
    -- (a sentence-transformers model carries an unused pooler)
    assert(p.grad or not p.trainable or name:match("^pooler%."), name .. " got no gradient")
    assert(p.trainable or not p.grad, name .. " is frozen but got a gradient")
    if p.grad then grads[name] = bytes(p.grad) end
  end
  return loss, grads, peak
end

local function assert_bitwise(ref, got, what)
  for name, g in pairs(ref) do
    local h = got[name]
    assert(h and #h == #g, what .. ": " .. name .. " missing")
    if g ~= h then
      local i = 1
      while g:byte(i) == h:byte(i) do i = i + 1 end
      error(("%s: %s differs bitwise at float %d"):format(what, name, math.floor((i - 1) / 4)), 0)
    end
  end
end

local function names_of(model)
  local out = {}
  for name in model:parameters() do out[#out + 1] = name end
  return table.concat(out, ",")
end

-- Counts the forwards of each encoder layer (an instance field over the class's method).
local function count_forwards(model)
  local layers, calls = model.bert.encoder.layers, { n = 0 }
  for _, layer in ipairs(layers) do
    local forward = getmetatable(layer).forward or layer.forward
    layer.forward = function(...) calls.n = calls.n + 1; return forward(...) end
  end
  return calls, function() for _, layer in ipairs(layers) do layer.forward = nil end end
end

local function same_as_plain(model, x, w, specs, must_be_lower)
  local names = names_of(model)
  checkpoint.apply(model, false)
  local calls, uncount = count_forwards(model)
  local loss0, g0, peak0 = run(model, x, w)
  local L = calls.n
  for _, spec in ipairs(specs) do
    local sizes = checkpoint.apply(model, spec)
    local label = type(spec) == "table" and (spec.segments and ("segments=" .. spec.segments) or ("every=" .. spec.every))
      or tostring(spec)
    assert(names_of(model) == names, label .. ": parameter names changed")
    calls.n = 0
    local loss, g, peak = run(model, x, w)
    assert(loss == loss0, ("%s: loss %.17g vs %.17g"):format(label, loss, loss0))
    assert_bitwise(g0, g, label)
    if must_be_lower(sizes) then
      assert(peak < peak0, ("%s: peak activations %d not below the plain %d"):format(label, peak, peak0))
    end
    -- every segment but the last runs its layers again in the backward; the last keeps its
    -- forward's (trainer.nn.Checkpoint's keeps_forward)
    assert(calls.n == 2 * L - sizes[#sizes], ("%s: %d layer forwards in a step, want %d"):format(label, calls.n,
      2 * L - sizes[#sizes]))
  end
  uncount()
  checkpoint.apply(model, false)
  local loss, g = run(model, x, w)
  assert(loss == loss0, "after apply(false): loss differs")
  assert_bitwise(g0, g, "after apply(false)")
end

return {
  { "segment_sizes", function()
    local function eq(a, b) return table.concat(a, ",") == table.concat(b, ",") end
    assert(checkpoint.segments(6, false) == nil)
    assert(eq(checkpoint.segments(6, "auto"), { 3, 3 }))
    assert(eq(checkpoint.segments(9, "auto"), { 3, 3, 3 }))
    assert(eq(checkpoint.segments(12, "auto"), { 4, 4, 4 }))
    assert(eq(checkpoint.segments(24, "auto"), { 5, 5, 5, 5, 4 }))
    assert(eq(checkpoint.segments(1, "auto"), { 1 }))
    assert(eq(checkpoint.segments(7, { segments = 3 }), { 3, 2, 2 }))
    assert(eq(checkpoint.segments(3, { segments = 5 }), { 1, 1, 1 }))
    assert(eq(checkpoint.segments(7, { every = 3 }), { 3, 3, 1 }))
    assert(eq(checkpoint.segments(4, { every = 9 }), { 4 }))
    for _, bad in ipairs({ { segments = 0 }, { every = 1.5 }, { segments = 2, every = 2 }, "yes", {} }) do
      local ok, err = pcall(checkpoint.segments, 6, bad)
      assert(not ok and tostring(err):find("checkpoint"), "bad spec accepted: " .. tostring(err))
    end
  end },

  { "every_segmentation_bitwise_with_dropout_and_lower_peak", function()
    local L = 4
    with_tiny(L, 4, 12, function(model, x, w)
      local specs = { "auto", { every = 1 }, { every = 2 }, { every = 3 }, { every = L } }
      for n = 1, L do specs[#specs + 1] = { segments = n } end
      -- one segment holding every layer re-creates all of them at once in backward: no saving
      same_as_plain(model, x, w, specs, function(sizes) return #sizes > 1 end)
    end)
  end },

  { "dropout_really_on_and_checkpoint_replays_the_forward_key", function()
    with_tiny(2, 3, 8, function(model, x, w)
      checkpoint.apply(model, { segments = 2 })
      local l1 = run(model, x, w, 5)
      local l2 = run(model, x, w, 6)
      assert(l1 ~= l2, "a different rng step must give a different dropout mask (is dropout on?)")
      model:eval()
      local e = model:forward(x)
      assert(next(model.bert.encoder.layers[1].saved) == nil, "eval mode must keep nothing")
      e:free()
    end)
  end },

  { "frozen_layers_pass_input_gradients", function()
    with_tiny(3, 3, 8, function(model, x, w)
      -- freeze everything but the embeddings: their gradient must flow through the 3 frozen layers
      for name, p in model:parameters() do p.trainable = name:match("^embeddings%.") ~= nil end
      local function grads()
        model:train()
        model.rng.step = 2
        model:zero_grad()
        local e = model:forward(x)
        model:backward(w)
        e:free()
        local out = {}
        for name, p in model:parameters() do
          if p.trainable then out[name] = bytes(p.grad) else assert(p.grad == nil, name .. " is frozen but has a grad") end
        end
        return out
      end
      local g0 = grads()
      local nonzero = false
      for _, v in ipairs(model.bert.embeddings.norm.weight.grad:values()) do if v ~= 0 then nonzero = true end end
      assert(nonzero, "no gradient reached the embeddings through the frozen layers")
      checkpoint.apply(model, { every = 1 })
      assert_bitwise(g0, grads(), "frozen, every=1")
    end)
  end },

  { "frozen_linear_keeps_nothing_and_passes_the_same_dx", function()
    local Linear = require("trainer.nn.linear")
    local lin = Linear.new(8, 6)
    lin.weight.value:free(); lin.weight.value = T.randn({ 6, 8 }, { seed = 2, stream = 1, tag = "weights" })
    local x = T.randn({ 2, 3, 8 }, { seed = 2, stream = 2 })
    local dy = T.randn({ 2, 3, 6 }, { seed = 2, stream = 3 })
    local y = lin:forward(x)
    local dx1 = lin:backward(dy)
    local dx_trainable = bytes(dx1)
    dx1:free()
    lin:set_trainable(false)
    y:free()
    local a0 = memory.stats().by_tag.activations
    y = lin:forward(x)
    y:free()
    assert(memory.stats().by_tag.activations == a0 and lin.saved.x == nil, "a frozen Linear keeps x")
    local dx = lin:backward(dy)
    assert(bytes(dx) == dx_trainable and lin.weight.grad == nil, "frozen dx differs or a grad appeared")
    local ok, err = pcall(lin.backward, lin, dy)
    assert(not ok and tostring(err):find("nothing saved"), "a second backward must be a user error: " .. tostring(err))
    dx:free(); x:free(); dy:free(); lin:free()
  end },

  { "lora_wrapped_layers_bitwise_and_frozen_keep_nothing", function()
    local lora = require("trainer.train.lora")
    local Linear = require("trainer.nn.linear")
    local L = 4
    local x, w = batch(4, 12, 32, 60)
    local model = tiny_encoder(L, 2)
    lora.apply(model, { r = 4, alpha = 8, dropout = 0.1, targets = { "query", "value" } })
    -- B starts at zero (then A's gradient is zero too): give it values so both are exercised
    for name, p in model:parameters() do
      if name:match("lora_B%.weight$") then
        local r = T.randn(p.value:shape(), { seed = 4, stream = #name, tag = "weights" })
        p.value:free()
        p.value = r
      end
    end
    -- after a forward with gradients, no frozen Linear (the adapted ones' bases, key, the output
    -- denses, the feed-forward) keeps its input
    model:train()
    local e = model:forward(x)
    local frozen = 0
    for name, m in model:named_modules() do
      if getmetatable(m) == Linear and not m.weight.trainable then
        frozen = frozen + 1
        assert(m.saved.x == nil, name .. ": a frozen Linear keeps its input")
      end
    end
    assert(frozen >= 6 * L, ("%d frozen Linears, want at least %d"):format(frozen, 6 * L))
    model:backward(w)
    e:free()
    same_as_plain(model, x, w, { "auto", { every = 1 }, { segments = 3 } }, function(sizes) return #sizes > 1 end)
    free_input(x, w)
    model:free()
  end },

  { "classifier_and_no_encoder", function()
    local cfg = bert.config({ hidden_size = 32, num_hidden_layers = 3, num_attention_heads = 4,
      intermediate_size = 64, vocab_size = 60, max_position_embeddings = 64 }, "tiny")
    local model = bert.SequenceClassifier.new(bert.BertModel.new(cfg, { seed = 3 }), 3, { seed = 3 })
    local x, w = batch(4, 10, 3, 60)
    same_as_plain(model, x, w, { "auto", { segments = 3 } }, function(sizes) return false end)
    free_input(x, w)
    model:free()
    local Linear = require("trainer.nn.linear")
    local lin = Linear.new(4, 4)
    local ok, err = pcall(checkpoint.apply, lin, "auto")
    assert(not ok and tostring(err):find("no encoder"), tostring(err))
    assert(checkpoint.apply(lin, false) == nil)
    lin:free()
  end },

  { "minilm_short_sequences", function()
    local dir = native.root() .. "/models/all-MiniLM-L6-v2"
    local f = io.open(dir .. "/model.safetensors", "rb")
    if not f then print("SKIP minilm_short_sequences: " .. dir .. " is absent (make fetch-models)") return end
    f:close()
    local model = models.load_model(dir)
    local x, w = batch(2, 8, 384, 1000)
    same_as_plain(model, x, w, { "auto", { every = 4 } }, function(sizes) return #sizes > 1 end)
    free_input(x, w)
    model:free()
  end },
}
