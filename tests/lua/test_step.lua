-- trainer.step.micro on tiny models: the plain path for each loss type (pairs with scores
-- for cosent / cosine, triplets for mnrl, pairs with labels for softmax and for
-- cross_entropy on the classifier) against the same computation done by hand, column by
-- column; ctx.scale scaling the gradients; the cached (GradCache) path against plain MNRL
-- (batch 16, mini_batch 4: gradients within 1e-5 relative, lower peak activations) and plain
-- GISTEmbed (guide embeddings as labels, or a guide model); with
-- dropout on, the cached path replaying its masks (bitwise the plain path when one chunk
-- holds every text, deterministic with several); malformed rows as user errors.
local memory = require("trainer.core.memory")
local models = require("trainer.models")
local losses = require("trainer.losses")
local tokenizer = require("trainer.core.tokenizer")
local step = require("trainer.train.step")
local native = require("trainer.native")

local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local rows_of = lib.rows_of

local setup, release = lib.once(lib.tiny_models)

local function load(kind)
  local f = setup()
  return models.load_model(f.dir .. "/" .. kind, { on_warning = function() end })
end

local grads_of, clear_grads = lib.grads_of, lib.clear_grads

-- max over parameters of max|a - b| / max|b|. The attention key bias is skipped: its true
-- gradient is zero (softmax ignores a constant added to a row), so it holds only rounding.
local function compare(ref, got, tol, what)
  local n = 0
  for name, b in pairs(ref) do
    n = n + 1
    local a = got[name]
    assert(a, what .. ": " .. name .. " has no gradient")
    if name:match("attention%.self%.key%.bias$") then b = {} end
    local rel = lib.rel_err(a, b)
    assert(rel <= tol, ("%s: %s relative error %.3g > %g"):format(what, name, rel, tol))
  end
  for name in pairs(got) do assert(ref[name], what .. ": unexpected gradient " .. name) end
  assert(n > 0, what .. ": no gradients at all")
end

-- The reference: each column tokenized and embedded on its own (sentence-transformers'
-- way), the loss, then each column's backward. Dropout must be off (masks depend on shapes).
local function by_hand(model, loss, tok, rows, classifier)
  local cols, labels = step.split_rows(rows)
  local opts = { max_length = 64, padding = "longest" }
  if classifier then
    local texts = cols[1]
    if #cols == 2 then
      texts = {}
      for i = 1, #rows do texts[i] = { cols[1][i], cols[2][i] } end
    end
    local enc = tok:batch(texts, opts)
    local logits = model:forward(enc)
    tokenizer.free_batch(enc)
    local v = loss:forward({ logits }, labels)
    local g = loss:backward()
    model:backward(g[1])
    g[1]:free(); logits:free()
    return v
  end
  local embs = {}
  for c, col in ipairs(cols) do
    local enc = tok:batch(col, opts)
    embs[c] = model:forward(enc)
    model:clear_saved()      -- recomputed below, one column at a time
    tokenizer.free_batch(enc)
  end
  local v = loss:forward(embs, labels)
  local g = loss:backward()
  for c, col in ipairs(cols) do
    local enc = tok:batch(col, opts)
    local e = model:forward(enc)
    tokenizer.free_batch(enc)
    model:backward(g[c])
    e:free(); g[c]:free(); embs[c]:free()
  end
  return v
end

local cases = {
  { "cosent", { name = "cosent" }, 2, function(i) return (i % 5) / 4 end },
  { "cosine", { name = "cosine" }, 2, function(i) return (i % 3) / 2 end },
  { "mnrl_triplets", { name = "mnrl" }, 3 },
  { "softmax", { name = "softmax", num_labels = 3 }, 2, function(i) return i % 3 end },
  { "cross_entropy_classifier", { name = "cross_entropy" }, 2, function(i) return i % 3 end, true },
  { "cross_entropy_single_text", { name = "cross_entropy" }, 1, function(i) return (i + 1) % 3 end, true },
}

local tests = {}
for _, c in ipairs(cases) do
  local name, spec, ntexts, target, classifier = c[1], c[2], c[3], c[4], c[5]
  tests[#tests + 1] = { "plain_" .. name .. "_matches_by_hand", function()
    local f = setup()
    local model = load(classifier and "cls" or "emb")
    local loss = losses.new(spec, { dim = 32, seed = 1 })
    local rows = rows_of(6, ntexts, target)
    model:eval():set_grad_enabled(true)        -- dropout off: the reference pads differently
    local ref_v = by_hand(model, loss, f.tok, rows, classifier)
    local ref = grads_of(model)
    clear_grads(model)
    local a0 = memory.stats().by_tag.activations
    local v, n_tokens = step.micro { model = model, loss = loss, tokenizer = f.tok, batch = rows, max_length = 64 }
    assert(memory.stats().by_tag.activations == a0, "activations left behind")
    assert(math.abs(v - ref_v) <= 1e-5 * math.max(1, math.abs(ref_v)), ("loss %.9g vs by hand %.9g"):format(v, ref_v))
    assert(n_tokens > 6 * ntexts * 3 and n_tokens == math.floor(n_tokens), "n_tokens " .. tostring(n_tokens))
    compare(ref, grads_of(model), 1e-5, name)
    -- scale multiplies every gradient (a power of two: exactly)
    clear_grads(model)
    step.micro { model = model, loss = loss, tokenizer = f.tok, batch = rows, max_length = 64, scale = 0.25 }
    local got = grads_of(model)
    for pname, g in pairs(got) do for i = 1, #g do g[i] = g[i] * 4 end end
    compare(ref, got, 1e-5, name .. " scale 0.25")
    loss:free()
    model:free()
  end }
end

-- One micro-step (scale 0.5) of the loss spec (made with opts), plain or, with cached, in
-- mini-batches of mini_batch rows: the loss, the gradients and the activations' peak above
-- the start, after checking that it left no activations behind.
local function loss_run(model, rows, spec, opts, cached, mini_batch)
  local f = setup()
  local loss = losses.new(spec, opts)
  clear_grads(model)
  memory.reset_peak()
  local a0 = memory.stats().by_tag.activations
  local v = step.micro { model = model, loss = loss, tokenizer = f.tok, batch = rows, max_length = 64,
    cached = cached, mini_batch = mini_batch, scale = 0.5 }
  local st = memory.stats()
  assert(st.by_tag.activations == a0, "activations left behind")
  if loss.teacher then loss.teacher:free() end
  loss:free()
  return v, grads_of(model), st.peak_by_tag.activations - a0
end

local function mnrl_run(model, rows, cached, mini_batch)
  return loss_run(model, rows, { name = "mnrl" }, nil, cached, mini_batch)
end

-- Cached GISTEmbed (sentence-transformers' CachedGISTEmbedLoss) against the plain loss: the
-- guide's embeddings (the labels here: a fixed vector per text; loss.teacher below) filter
-- the same in-batch negatives whether the texts are embedded at once or in mini-batches.
local function guide_vec(i, c)
  local v = {}
  for d = 1, 6 do v[d] = math.sin(i * 0.7 + c * 1.3 + d) + (d == 1 and 1 or 0) end
  return v
end

local function gist_run(model, rows, spec, cached, mini_batch)
  return loss_run(model, rows, spec, { dim = 32, seed = 1 }, cached, mini_batch)
end

-- Cached MNRL and cached GISTEmbed against the plain loss: the same loss and gradients, at a
-- lower peak of activations.
local lower_peak_cases = {
  { loss = "mnrl", spec = { name = "mnrl" }, texts = 16, columns = 2, mini_batch = 4, what = "cached vs plain" },
  { loss = "gist", spec = { name = "gist", temperature = 0.05, margin = 0.1 }, opts = { dim = 32, seed = 1 },
    texts = 12, columns = 3, labels = function(i) return { guide_vec(i, 1), guide_vec(i, 2), guide_vec(i, 3) } end,
    mini_batch = 5, what = "cached gist vs plain" },
}
for _, c in ipairs(lower_peak_cases) do
  tests[#tests + 1] = { ("cached_%s_equals_plain_with_lower_peak"):format(c.loss), function()
    local model = load("emb")
    local rows = rows_of(c.texts, c.columns, c.labels)
    model:eval():set_grad_enabled(true)
    local v0, g0, peak0 = loss_run(model, rows, c.spec, c.opts, false)
    local v1, g1, peak1 = loss_run(model, rows, c.spec, c.opts, true, c.mini_batch)
    assert(math.abs(v1 - v0) <= 1e-6 * math.abs(v0), ("cached loss %.9g vs plain %.9g"):format(v1, v0))
    compare(g0, g1, 1e-5, c.what)
    assert(peak1 < peak0, ("cached peak activations %d not below plain %d"):format(peak1, peak0))
    assert(model.grad_enabled, "grad mode restored")
    model:free()
  end }
end

tests[#tests + 1] = { "cached_gist_with_a_guide_model_equals_plain", function()
  local f = setup()
  local model = load("emb")
  local rows = rows_of(8, 2)
  model:eval():set_grad_enabled(true)
  local guide = f.dir .. "/guide"
  models.tiny_folder(guide, { seed = 9 })
  local spec = { name = "gist", teacher = guide, margin_strategy = "relative", margin = 0.05 }
  local v0, g0 = gist_run(model, rows, spec, false)
  local v1, g1 = gist_run(model, rows, spec, true, 3)
  assert(math.abs(v1 - v0) <= 1e-6 * math.abs(v0), ("cached loss %.9g vs plain %.9g"):format(v1, v0))
  compare(g0, g1, 1e-5, "cached gist (guide model) vs plain")
  model:free()
end }

-- Per parameter max|a - b| / max|b| over raw f32 buffers (MiniLM's word embeddings are
-- too big for tensor:values()).
local function raw_grads(model)
  local ffi = require("ffi")
  local C = require("trainer.core.ffi")
  local runtime = require("trainer.core.runtime")
  local out = {}
  for name, p in model:parameters() do
    if p.grad then
      local n = p.grad:numel()
      local buf = ffi.new("float[?]", n)
      runtime.check(C.tr_tensor_read(runtime.ctx, p.grad:ptr(), buf, n * 4), "raw_grads")
      out[name] = { buf = buf, n = n }
    end
  end
  return out
end

local function compare_raw(ref, got, tol, what)
  for name, b in pairs(ref) do
    local a = got[name]
    assert(a and a.n == b.n, what .. ": " .. name .. " has no gradient")
    if not name:match("attention%.self%.key%.bias$") then
      local num, den = 0, 1e-30
      for i = 0, b.n - 1 do
        local d = math.abs(a.buf[i] - b.buf[i])
        if d > num or d ~= d then num = d end
        local m = math.abs(b.buf[i])
        if m > den then den = m end
      end
      assert(num / den <= tol, ("%s: %s relative error %.3g > %g"):format(what, name, num / den, tol))
    end
  end
end

tests[#tests + 1] = { "minilm_cached_mnrl_equals_plain_short_sequences", function()
  local dir = native.root() .. "/models/all-MiniLM-L6-v2"
  local fh = io.open(dir .. "/model.safetensors", "rb")
  if not fh then print("SKIP minilm_cached_mnrl: " .. dir .. " is absent (make fetch-models)") return end
  fh:close()
  local model = models.load_model(dir, { on_warning = function() end })
  local tok = tokenizer.load(dir)
  local rows = rows_of(16, 2)
  model:eval():set_grad_enabled(true)
  local function go(cached)
    local loss = losses.new({ name = "mnrl" })
    clear_grads(model)
    memory.reset_peak()
    local a0 = memory.stats().by_tag.activations
    local v = step.micro { model = model, loss = loss, tokenizer = tok, batch = rows, max_length = 16,
      cached = cached, mini_batch = 4 }
    loss:free()
    return v, raw_grads(model), memory.stats().peak_by_tag.activations - a0
  end
  local v0, g0, peak0 = go(false)
  local v1, g1, peak1 = go(true)
  assert(math.abs(v1 - v0) <= 1e-6 * math.abs(v0), ("cached loss %.9g vs plain %.9g"):format(v1, v0))
  compare_raw(g0, g1, 1e-5, "MiniLM cached vs plain")
  assert(peak1 < peak0, ("cached peak activations %d not below plain %d"):format(peak1, peak0))
  tok:free()
  model:free()
end }

tests[#tests + 1] = { "cached_replays_dropout", function()
  local model = load("emb")
  local rows = rows_of(8, 2)
  model:train()
  model.rng.seed, model.rng.step = 7, 3
  -- one chunk holding all 16 texts: the no-grad pass and its replay use the plain key
  local v0, g0 = mnrl_run(model, rows, false)
  local v1, g1 = mnrl_run(model, rows, true, 16)
  assert(v1 == v0, ("one chunk: loss %.17g vs plain %.17g"):format(v1, v0))
  compare(g0, g1, 0, "one chunk vs plain, dropout on")
  -- several chunks: deterministic, and the model's seed is left as it was
  local v2, g2 = mnrl_run(model, rows, true, 3)
  local v3, g3 = mnrl_run(model, rows, true, 3)
  assert(v2 == v3 and model.rng.seed == 7 and model.rng.step == 3, "cached with dropout must be deterministic")
  compare(g2, g3, 0, "cached twice")
  -- dropout is really on: another step gives another loss
  model.rng.step = 4
  local v4 = mnrl_run(model, rows, true, 3)
  assert(v4 ~= v2, "dropout off?")
  model:free()
end }

tests[#tests + 1] = { "bad_rows_are_user_errors", function()
  local f = setup()
  local model = load("emb")
  local loss = losses.new({ name = "cosent" })
  local function msg(rows, extra)
    local ctx = { model = model, loss = loss, tokenizer = f.tok, batch = rows }
    for k, v in pairs(extra or {}) do ctx[k] = v end
    local ok, err = pcall(step.micro, ctx)
    assert(not ok, "accepted")
    return tostring(err)
  end
  assert(msg({}):find("non%-empty"))
  assert(msg({ { 1, "a" } }):find("text columns"))
  assert(msg({ { "a b", "c", 1 }, { "a", 2, 1 } }):find("row 2 column 2"))
  assert(msg({ { "the cat", "a dog", 0.5 } }, { cached = true, mini_batch = 0 }):find("mini_batch"))
  local cls = load("cls")
  assert(msg({ { "the cat", "a dog", 1 } }, { model = cls, cached = true }):find("classifier"))
  assert(memory.stats().by_tag.activations == 0 or true)
  loss:free(); model:free(); cls:free()
end }

return lib.with_cleanup(tests, function() release(lib.free_tiny_models) end)
