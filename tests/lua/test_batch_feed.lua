-- The batch feed (trainer.train.batch_feed) through its CPU stand-in, the
-- path a GPU run takes with the device replaced by the CPU: feed:encode gives tok:batch's
-- tensors (views of the slot's buffers, slots alternating) and the count of non-padding
-- tokens; step.micro through the feed gives bitwise the loss and gradients of the plain path
-- for every loss kind (the targets of mnrl, softmax and cross_entropy and the position ids
-- riding with the batch: no tok:batch, no targets upload of the loss's own, no position ids
-- upload of the model's), and for the cached (GradCache) path; the feed's position ids are
-- the model's rule for BERT and RoBERTa;
-- a whole run with the feed (and with the deferred values a GPU run has) writes the rows of
-- the run without it, every micro-batch through the feed and released. The CUDA half (copy
-- stream, events, pinned buffers) is tests/c/test_batch_feed.c's, against a fake runtime.
local native = require("trainer.native")
local models = require("trainer.models")
local losses = require("trainer.losses")
local tokenizer = require("trainer.core.tokenizer")
local T = require("trainer.core.tensor")
local step = require("trainer.train.step")
local batch_feed = require("trainer.train.batch_feed")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")
local case = dofile(native.root() .. "/tests/lua/step_reads_case.lua")

local rows_of = lib.rows_of

local setup, release = lib.once(lib.tiny_models)
local grads_of, clear_grads = lib.grads_of, lib.clear_grads

local function same_grads(a, b, what)
  local n = 0
  for name, g in pairs(a) do
    local h = assert(b[name], what .. ": no gradient for " .. name)
    for i = 1, #g do
      if g[i] ~= h[i] then error(("%s: %s[%d] %.17g vs %.17g"):format(what, name, i, g[i], h[i])) end
    end
    n = n + 1
  end
  assert(n > 0, what .. ": no gradients")
end

-- Counts calls of tok:batch, of the loss's own i64 uploads (T.from_table / T.arange) and of
-- the model's i32 ones (position ids) in fn.
local function counting(tok, fn)
  local c = { batch = 0, targets = 0, positions = 0 }
  local ft, ar = T.from_table, T.arange
  tok.batch = function(self, ...) c.batch = c.batch + 1 return getmetatable(self).__index.batch(self, ...) end
  T.from_table = function(v, o)
    if o and o.dtype == "i64" then c.targets = c.targets + 1 end
    if o and o.dtype == "i32" then c.positions = c.positions + 1 end
    return ft(v, o)
  end
  T.arange = function(...) c.targets = c.targets + 1 return ar(...) end
  local ok, err = pcall(fn)
  tok.batch, T.from_table, T.arange = nil, ft, ar
  if not ok then error(err, 0) end
  return c
end

local tests = {}

tests[#tests + 1] = { "encode_gives_tok_batch_tensors_and_tokens", function()
  local f = setup()
  local feed = batch_feed.new("cpu")
  local texts = { "the cat sat on the mat", "a dog", "good bird is not bad house" }
  local opts = { max_length = 64, truncation = true, padding = "longest" }
  local ref = f.tok:batch(texts, opts)
  local want_tokens = 0
  for _, v in ipairs(ref.attention_mask:values()) do want_tokens = want_tokens + v end
  for k = 1, 3 do
    local enc, n_tokens = feed:encode(f.tok, texts, opts, { 2, 0, 1 })
    assert(feed:slot() == (k - 1) % 2 and not feed:pinned(), "slot " .. feed:slot())
    assert(n_tokens == want_tokens, ("n_tokens %d, the mask says %d"):format(n_tokens, want_tokens))
    for _, name in ipairs({ "input_ids", "attention_mask", "token_type_ids" }) do
      local a, b = enc[name], ref[name]
      assert(a:dtype() == "i32" and a:shape()[1] == 3 and a:shape()[2] == b:shape()[2], name .. " shape")
      local va, vb = a:values(), b:values()
      for i = 1, #vb do assert(va[i] == vb[i], ("%s[%d]: %d vs %d"):format(name, i, va[i], vb[i])) end
    end
    local t = enc.targets:values()
    assert(enc.targets:dtype() == "i64" and #t == 3 and t[1] == 2 and t[2] == 0 and t[3] == 1, "targets")
    tokenizer.free_batch(enc)
    feed:release()
  end
  tokenizer.free_batch(ref)
  feed:free()
end }

local kinds = {
  { "cosent", { name = "cosent" }, 2, function(i) return (i % 5) / 4 end },
  { "mnrl_triplets", { name = "mnrl", scale = 20 }, 3, nil, nil, true },
  { "mnrl_symmetric", { name = "mnrl", symmetric = true }, 2, nil, nil, true },
  { "softmax", { name = "softmax", num_labels = 3 }, 2, function(i) return i % 3 end, nil, true },
  { "cross_entropy_classifier", { name = "cross_entropy" }, 2, function(i) return i % 3 end, true, true },
}

for _, k in ipairs(kinds) do
  local name, spec, ntexts, target, classifier, fed = k[1], k[2], k[3], k[4], k[5], k[6]
  tests[#tests + 1] = { "micro_through_feed_is_bitwise_plain_" .. name, function()
    local f = setup()
    local model = models.load_model(f.dir .. "/" .. (classifier and "cls" or "emb"), { on_warning = function() end })
    model:train()
    model.rng = { seed = 9, step = 4 }   -- dropout on: the same masks both ways
    local loss = losses.new(spec, { dim = 32, seed = 1 })
    local rows = rows_of(6, ntexts, target)
    local ctx = { model = model, loss = loss, tokenizer = f.tok, batch = rows, max_length = 64, scale = 0.5 }
    local v0, n0 = step.micro(ctx)
    local g0 = grads_of(model)
    clear_grads(model)
    local feed = batch_feed.new("cpu")
    ctx.feed = feed
    local v1, n1
    local c = counting(f.tok, function() v1, n1 = step.micro(ctx) end)
    assert(v1 == v0 and n1 == n0, ("loss %.17g vs %.17g, tokens %d vs %d"):format(v1, v0, n1, n0))
    same_grads(g0, grads_of(model), name)
    assert(c.batch == 0, c.batch .. " tok:batch calls with a feed")
    assert(c.positions == 0, c.positions .. " position id uploads by the model with a feed")
    if fed then assert(c.targets == 0, name .. ": the loss uploaded its own targets " .. c.targets .. " times") end
    assert(loss.fed_targets == nil, "targets left with the loss")
    feed:free(); loss:free(); model:free()
  end }
end

tests[#tests + 1] = { "position_ids_are_the_models_rule", function()
  -- BERT (0..T-1) and RoBERTa / XLM-R (pad + the running count of non-pad tokens): the feed's
  -- host positions, by the family's position_ids, equal what the model makes from the same ids
  local bert = require("trainer.models.bert")
  local registry = require("trainer.models.registry")
  local json = require("trainer.core.json")
  local f = setup()
  local raw = json.read(f.dir .. "/emb/config.json")
  local feed = batch_feed.new("cpu")
  local texts = { "the cat sat on the mat and the dog", "a dog", "good bird" }
  for _, family in ipairs({ "bert", "roberta" }) do
    local r = {}
    for k, v in pairs(raw) do r[k] = v end
    if family == "roberta" then r.model_type, r.pad_token_id, r.max_position_embeddings = "roberta", 0, 66 end
    local cfg, fam = registry.config(r, "test " .. family)
    assert(cfg.family == family and fam.name == family, "family " .. tostring(cfg.family))
    local enc = feed:encode(f.tok, texts, { max_length = 64, padding = "longest" }, nil,
      function(ids, pos, B, L) fam.position_ids(cfg, ids, pos, B, L, 0) end)
    local want, owned = bert.prepare_inputs(cfg, { input_ids = enc.input_ids, attention_mask = enc.attention_mask })
    local a, b = enc.position_ids:values(), want.position_ids:values()
    assert(#a == #b and #a == 3 * enc.input_ids:shape()[2], family .. ": sizes")
    for i = 1, #b do assert(a[i] == b[i], ("%s: position %d is %d, the model's %d"):format(family, i, a[i], b[i])) end
    if family == "roberta" then assert(a[#a] == 0 and a[2] == 2, "roberta: pads at the pad id, counts from pad + 1") end
    for _, t in ipairs(owned) do t:free() end
    tokenizer.free_batch(enc)
    feed:release()
  end
  feed:free()
end }

tests[#tests + 1] = { "cached_mnrl_through_feed_is_bitwise_plain", function()
  local f = setup()
  local model = models.load_model(f.dir .. "/emb", { on_warning = function() end })
  model:train()
  model.rng = { seed = 5, step = 2 }
  local loss = losses.new({ name = "mnrl" })
  local ctx = { model = model, loss = loss, tokenizer = f.tok, batch = rows_of(10, 2), max_length = 64,
    cached = true, mini_batch = 4 }
  local v0 = step.micro(ctx)
  local g0 = grads_of(model)
  clear_grads(model)
  ctx.feed = batch_feed.new("cpu")
  local v1
  local c = counting(f.tok, function() v1 = step.micro(ctx) end)
  assert(v1 == v0, ("cached loss %.17g vs %.17g"):format(v1, v0))
  same_grads(g0, grads_of(model), "cached")
  assert(c.batch == 0, "tok:batch called")
  ctx.feed:free(); loss:free(); model:free()
end }

tests[#tests + 1] = { "run_through_feed_writes_the_same_rows", function()
  -- the stand-in of a GPU run: every micro-batch encoded through the feed and released
  local Feed = getmetatable(batch_feed.new("cpu")).__index
  local enc, rel = Feed.encode, Feed.release
  local n_enc, n_rel = 0, 0
  Feed.encode = function(...) n_enc = n_enc + 1 return enc(...) end
  Feed.release = function(...) n_rel = n_rel + 1 return rel(...) end
  local ok, err = pcall(function()
    local plain = case.run(5)
    local fed = case.run(5, { batch_feed = true })
    assert(n_enc == 12 and n_rel == 12, ("%d encodes, %d releases for 12 steps"):format(n_enc, n_rel))
    local lazy = case.run(5, { batch_feed = true, lazy_scalars = true })
    local mem = { mem_allocated = true, mem_reserved = true, mem_peak = true, mem_by_tag = true, mem_peak_by_tag = true }
    assert(#fed == 12 and #lazy == 12 and #plain == 12, "rows")
    for i = 1, 12 do
      for key, v in pairs(plain[i]) do
        if not mem[key] then
          assert(fed[i][key] == v, ("row %d %s: %s vs %s"):format(i, key, tostring(fed[i][key]), tostring(v)))
          assert(lazy[i][key] == v, ("deferred row %d %s: %s vs %s"):format(i, key, tostring(lazy[i][key]), tostring(v)))
        end
      end
    end
  end)
  Feed.encode, Feed.release = enc, rel
  if not ok then error(err, 0) end
end }

return lib.with_cleanup(tests, function() release(lib.free_tiny_models) end)
