-- adaptive_layer (AdaptiveLayerLoss) against sentence-transformers' own class
-- (tests/data/adaptive_layer_golden.json, written by tests/ref/make_adaptive_layer_golden.py):
-- the committed tiny BERT (2 layers), dropout off, every earlier hidden state each step
-- (n_layers_per_step = -1), around mnrl (default weights; other weights and temperature) and
-- cosent (no KL term): the loss value and the gradients of a few parameters after one
-- step.micro, within 1e-5 relative. Also: the layer draw (n_layers_per_step = 1) depends on
-- the dropout key only, and the keys' argument checks (loss.teacher with an inner loss that
-- takes one).
local json = require("trainer.core.json")
local models = require("trainer.models")
local losses = require("trainer.losses")
local step = require("trainer.train.step")
local native = require("trainer.native")

local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local golden = json.read(native.root() .. "/tests/data/adaptive_layer_golden.json")
local dir = native.root() .. "/tests/data/tiny_bert"

local function run(spec)
  local full = { name = "adaptive_layer" }
  for k, v in pairs(spec) do full[k] = v end
  local rows = {}
  for i = 1, #golden.anchors do
    rows[i] = { golden.anchors[i], golden.positives[i] }
    if spec.inner == "cosent" then rows[i][3] = golden.scores[i] end
  end
  return lib.tiny_bert_step(full, rows, nil, function(model)
    assert(#model.bert.encoder.layers == 2, "the encoder's layers restored")
  end)
end

local tests = {}
for i, c in ipairs(golden.cases) do
  tests[#tests + 1] = { ("matches_st_%d_%s"):format(i, c.spec.inner), function()
    local v, grads = run(c.spec)
    assert(math.abs(v - c.loss) <= 1e-5 * math.abs(c.loss), ("loss %.9g vs ST's AdaptiveLayerLoss %.9g"):format(v, c.loss))
    for name, ref in pairs(c.grads) do
      local got = assert(grads[name], name .. " has no gradient")
      local rel = lib.rel_err(got, ref)
      assert(rel <= 1e-5, ("%s: relative error %.3g vs ST"):format(name, rel))
    end
  end }
end

tests[#tests + 1] = { "modernbert_is_refused_naming_its_family", function()
  local mdir = native.root() .. "/tests/data/tiny_modernbert"
  local model = models.load_model(mdir, { on_warning = function() end })
  local tok = require("trainer.core.tokenizer").load(mdir)
  local loss = losses.new({ name = "adaptive_layer", inner = "mnrl" }, { seed = 1 })
  local ok, e = pcall(step.micro, { model = model, loss = loss, tokenizer = tok, max_length = 32,
    batch = { { golden.anchors[1], golden.positives[1] }, { golden.anchors[2], golden.positives[2] } } })
  loss:free()
  model:free()
  assert(not ok and tostring(e):find("the modernbert family has no encoder layer stack", 1, true), tostring(e))
end }

tests[#tests + 1] = { "layer_draw_follows_the_dropout_key", function()
  local loss = losses.new({ name = "adaptive_layer", n_layers_per_step = 2 })
  local a, b = loss:layers(6, 3, 10), loss:layers(6, 3, 10)
  assert(#a == 2 and a[1] == b[1] and a[2] == b[2] and a[1] < a[2] and a[2] <= 5, "the same draw for the same key")
  local seen = {}
  for s = 1, 40 do for _, k in ipairs(loss:layers(6, 3, s)) do seen[k] = true end end
  for k = 0, 5 do assert(seen[k], "layer " .. k .. " never drawn in 40 steps") end
  assert(#loss:layers(6, 1, 1) == 2 and #losses.new({ name = "adaptive_layer", n_layers_per_step = -1 }):layers(6, 1, 1) == 6)
  assert(#losses.new({ name = "adaptive_layer", n_layers_per_step = 9 }):layers(6, 1, 1) == 6)
end }

-- The premise of the cut runs: with dropout on, the encoder cut after layer 1 outputs exactly
-- what layer 1 gave layer 2 in the full run (the masks are keyed by seed, step, layer, site).
tests[#tests + 1] = { "cut_run_replays_the_full_runs_hidden_state_with_dropout", function()
  local model = models.load_model(dir, { on_warning = function() end })
  model:train():set_grad_enabled(false)
  model.rng.seed, model.rng.step = 7, 3
  local tok = require("trainer.core.tokenizer").load(dir)
  local enc = tok:batch(golden.anchors, { max_length = 64, padding = "longest" })
  local encoder = model.bert.encoder
  local layers = encoder.layers
  local l2, seen = layers[2], nil
  l2.forward = function(self, h, mask)
    seen = h:values()
    return getmetatable(self).forward(self, h, mask)
  end
  model:forward(enc)
  l2.forward = nil
  -- the hidden state of the encoder cut after layer 1, as its values
  local function cut_run()
    local out
    encoder.layers = { layers[1] }
    encoder.forward = function(self, x, mask)
      local h = getmetatable(self).forward(self, x, mask)
      out = h:values()
      return h
    end
    model:forward(enc)
    encoder.forward, encoder.layers = nil, layers
    return out
  end
  local cut = cut_run()
  assert(seen and cut and #seen == #cut and #cut > 0, "both hidden states recorded")
  for i = 1, #cut do assert(seen[i] == cut[i], "element " .. i .. " differs") end
  -- and dropout was on: the same run in eval mode differs
  model:eval()
  local plain = cut_run()
  local differs = false
  for i = 1, #cut do if plain[i] ~= cut[i] then differs = true end end
  assert(differs, "dropout had no effect")
  model:free()
end }

tests[#tests + 1] = { "argument_errors", function()
  local function msg(spec)
    local ok, e = pcall(losses.new, spec)
    assert(not ok, "expected an error")
    return tostring(type(e) == "table" and (e.detail or e.message) or e)
  end
  assert(msg({ name = "adaptive_layer", n_layers_per_step = 0 }):find("n_layers_per_step"))
  assert(msg({ name = "adaptive_layer", kl_temperature = -1 }):find("kl_temperature"))
  assert(msg({ name = "matryoshka", dims = { 4 }, inner = "mse" }):find("inner"))
  -- a teacher (guide) only with an inner loss that takes one
  local keys = require("trainer.recipe.keys")
  assert(pcall(keys.resolve, "loss", { name = "adaptive_layer", inner = "gist", teacher = "models/guide" }))
  local ok, e = pcall(keys.resolve, "loss", { name = "adaptive_layer", inner = "cosent", teacher = "models/guide" })
  assert(not ok and tostring(type(e) == "table" and (e.detail or e.message) or e):find("teacher"))
end }
return tests
